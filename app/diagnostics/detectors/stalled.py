"""Stalled: the reward shows no upward trend over most of the run and gained little overall,
and no held-out score rises either (issue 54: a run whose train reward sat flat while its eval
reward rose 0.756 -> 0.835 was learning, not stalled)."""

from __future__ import annotations

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import MIN_WINDOW_PTS, NO_NOISE, early, improving
from app.diagnostics.model import Finding
from app.diagnostics.stats import (
    med,
    noise_sigma,
    r3,
    rho_crit,
    robust_sigma,
    rolling_median,
    run_start,
    spearman,
    tail,
)
from app.diagnostics.view import Series, View

METRIC = "reward"
MIN_STEPS = 50  # judging a trend needs a real stretch of training
MIN_PTS = 10
GAIN_SIGMA = 1.5  # a run whose recent level is >1.5 noise sigma above its start has learned
LATE_FRAC = 0.5  # "recent level" = the second half: a stall is judged on a long stretch
START_FRACS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # plateau must cover >= 40% of the run
SMOOTH_DIV, SMOOTH_MIN = 10, 3  # plateau smoothing: a tenth of the points (odd, at least 3)
BAND_SIGMA = 4.0  # the plateau: smoothed reward within 4 sigma (of a smoothed point) of its level
MEDIAN_VAR = 1.57  # variance of a median is ~pi/2 times that of a mean (normal noise)

ACTIONS = ["Dry-run the reward functions on sample outputs: do they produce variation?",
           "Smoke-test a few steps and check reward spread (frac_reward_zero_std)",
           "Lower the task difficulty or add partial-credit reward",
           "Check the learning rate (too low: nothing moves)"]


def detect(view: View) -> list[Finding]:
    s = view.series(METRIC)
    if s is None or len(s) < MIN_PTS or s.span + 1 < MIN_STEPS:
        return []  # too short: listed as unchecked with the reason (the declaration below)
    if improving(view.series("eval_reward")):
        return []  # the held-out score rises: the run learns, whatever the train reward shows
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
            start = plateau_start(s, late, w.first)
            return [Finding(
                category="stalled", severity="warning", first_step=start, last_step=s.last,
                summary=(f"Reward has no upward trend from step {start} to {s.last} "
                         f"(recent level {late:.3g}, early {base:.3g}: a gain of only "
                         f"{gain:.1f} noise sigma): the run is not learning."),
                evidence={"rank_trend_rho": r3(rho), "significant_rho_above": r3(rho_crit(len(w))),
                          "early_reward": r3(base), "recent_reward": r3(late),
                          "gain_in_noise_sigmas": r3(gain), "expected_gain_sigmas_at_least":
                          GAIN_SIGMA, "points": len(w)},
                actions=ACTIONS, metric=METRIC)]
    return []


def plateau_start(s: Series, level: float, window_first: int) -> int:
    """Where the plateau starts: the first step of the trailing stretch where the smoothed
    reward stays within BAND_SIGMA of the plateau's level, never before the window without a
    trend. Why: a reward that climbs from -10 to 0 by step 60 and then stays flat stalled at
    step 60; "from step 10" contradicts the chart."""
    k = max(SMOOTH_MIN, (len(s) // SMOOTH_DIV) | 1)
    smooth = rolling_median(s.values, k)
    late = tail(s.steps, s.values, LATE_FRAC, MIN_WINDOW_PTS)
    sigma = max(robust_sigma(late), noise_sigma(s.values)) or NO_NOISE
    band = BAND_SIGMA * sigma * (MEDIAN_VAR / k) ** 0.5
    start = run_start(s.steps, abs(smooth - level) <= band)
    return max(window_first, start if start is not None else window_first)


DETECTORS = (Detector("stalled", (METRIC, "eval_reward"), detect, min_steps=MIN_STEPS,
                      min_points=MIN_PTS),)
