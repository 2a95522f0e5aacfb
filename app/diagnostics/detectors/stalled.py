"""Stalled: the reward shows no upward trend over most of the run and gained little overall."""

from __future__ import annotations

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import MIN_WINDOW_PTS, NO_NOISE, early
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, noise_sigma, r3, rho_crit, spearman, tail
from app.diagnostics.view import View

METRIC = "reward"
MIN_STEPS = 50  # judging a trend needs a real stretch of training
MIN_PTS = 10
GAIN_SIGMA = 1.5  # a run whose recent level is >1.5 noise sigma above its start has learned
LATE_FRAC = 0.5  # "recent level" = the second half: a stall is judged on a long stretch
START_FRACS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # plateau must cover >= 40% of the run

ACTIONS = ["Dry-run the reward functions on sample outputs: do they produce variation?",
           "Smoke-test a few steps and check reward spread (frac_reward_zero_std)",
           "Lower the task difficulty or add partial-credit reward",
           "Check the learning rate (too low: nothing moves)"]


def detect(view: View) -> list[Finding]:
    s = view.series(METRIC)
    if s is None or len(s) < MIN_PTS or s.span < MIN_STEPS:
        return []
    sigma = noise_sigma(s.values) or NO_NOISE
    base, late = med(early(s)), med(tail(s.steps, s.values, LATE_FRAC, MIN_WINDOW_PTS))
    gain = (late - base) / sigma
    if gain >= GAIN_SIGMA:
        return []
    for frac in START_FRACS:
        w = s.between(s.steps[0] + frac * s.span, s.steps[-1])
        if len(w) < MIN_PTS or w.span < MIN_STEPS:
            break
        rho = spearman(w.steps, w.values)
        if rho < rho_crit(len(w)):
            return [Finding(
                category="stalled", severity="warning", first_step=w.first, last_step=s.last,
                summary=(f"Reward has no upward trend from step {w.first} to {s.last} "
                         f"(recent level {late:.3g}, early {base:.3g}: a gain of only "
                         f"{gain:.1f} noise sigma): the run is not learning."),
                evidence={"rank_trend_rho": r3(rho), "significant_rho_above": r3(rho_crit(len(w))),
                          "early_reward": r3(base), "recent_reward": r3(late),
                          "gain_in_noise_sigmas": r3(gain), "expected_gain_sigmas_at_least":
                          GAIN_SIGMA, "points": len(w)},
                actions=ACTIONS, metric=METRIC)]
    return []


DETECTORS = (Detector("stalled", (METRIC,), detect),)
