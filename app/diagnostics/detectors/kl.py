"""KL to the reference: sustained blow-up, isolated spikes, and a constant offset from step 1.

Categories: ``kl_blowup`` (sustained growth), ``kl_spike`` (isolated spikes, kept out of the
level series by the history), ``kl_offset`` (KL already high at the first steps and flat:
a policy/reference mismatch, not drift; info, a warning from 5 nats per token, where the penalty
term swamps the reward: issue 54, a run at KL ~10 from step 1). KL missing or always 0 (beta = 0) gives
nothing.
"""

from __future__ import annotations

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import early, recent, spike_summary, trend
from app.diagnostics.fix import Fix, Scale, Settings
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3, run_start
from app.diagnostics.view import View

METRIC = "kl"
MIN_PTS = 6
GROWTH = 10.0  # recent level an order of magnitude above the early level ...
FLOOR = 1e-3  # ... where the early level counts as at least this (KL starts at ~0 by design)
WARN_ABS = 0.5  # per-token KL below this is ordinary drift for GRPO fine-tuning
CRITICAL_ABS = 5.0  # far from the reference: outputs likely degenerate
OFFSET_ABS = 0.3  # KL this high at the very first steps cannot be drift
OFFSET_BAND = (0.5, 2.0)  # ... and it stays within this factor of its start
OFFSET_FIRST_PTS = 3  # "at the first steps" = the median of the first three points
ONSET_SHARE = 0.5  # a blow-up starts where KL first stays above half of either threshold

BLOWUP_ACTIONS = ["Raise beta (KL penalty)", "Lower the learning rate",
                  "Check clip ratios (clip_ratio/*) and epsilon",
                  "Inspect rollouts for reward hacking"]
SPIKE_ACTIONS = ["Check grad_norm and the learning rate around the spike steps",
                 "Consider gradient clipping (max_grad_norm) or a lower learning rate",
                 "Inspect the rollouts logged at those steps"]
OFFSET_ACTIONS = [("Check the reference model is the same checkpoint/adapter as the starting "
                  "policy (e.g. a stage-2 run whose reference is the base model)")]


def _level(view: View) -> list[Finding]:
    """Blow-up or offset of the spike-free KL level."""
    s, h = view.series(METRIC), view.hist(METRIC)
    if h is None or not h.gmax or s is None or len(s) < MIN_PTS:  # beta = 0: nothing logged
        return []
    out: list[Finding] = []
    # KL is ~0 at the first step by construction (policy = reference), so the first point is
    # also a baseline: a jump within the early window must not hide in its median.
    early_kl, now = med(early(s)), med(recent(s))
    base = min(early_kl, float(s.values[0]))
    start3 = med(s.values[:OFFSET_FIRST_PTS])
    rho, crit = trend(s)
    # rising, or a jump that holds: every recent point above the warning level
    rising_or_held = rho >= crit or float(recent(s).min()) >= WARN_ABS
    ev = {"early_kl": r3(early_kl), "recent_kl": r3(now)}
    if now >= GROWTH * max(base, FLOOR) and now >= WARN_ABS and rising_or_held:
        start = run_start(s.steps, s.values >= ONSET_SHARE * max(WARN_ABS, GROWTH * max(base, FLOOR)))
        out.append(Finding(
            category="kl_blowup", severity="critical" if now >= CRITICAL_ABS else "warning",
            first_step=start or s.first, last_step=s.last,
            summary=(f"KL to the reference grew from {base:.3g} to {now:.3g} and "
                     + ("keeps rising" if rho >= crit else "stays there")
                     + ": the policy is drifting far from the reference."),
            evidence={**ev, "baseline_kl": r3(base), "growth_factor": r3(now / max(base, FLOOR)),
                      "rank_trend_rho": r3(rho),
                      "expected_below": WARN_ABS},
            actions=BLOWUP_ACTIONS, metric=METRIC))
    elif (min(start3, float(s.values[0])) >= OFFSET_ABS
          and OFFSET_BAND[0] <= now / start3 <= OFFSET_BAND[1]):
        out.append(Finding(
            category="kl_offset", severity="warning" if start3 >= CRITICAL_ABS else "info",
            first_step=s.first, last_step=s.last,
            summary=(f"KL is already {start3:.3g} at the first steps and stays near it "
                     f"({now:.3g} recently): likely a policy/reference mismatch, not drift."),
            evidence={**ev, "first_points_kl": r3(start3), "expected_at_start_below": OFFSET_ABS},
            actions=OFFSET_ACTIONS, metric=METRIC))
    return out


def _spikes(view: View) -> list[Finding]:
    sp = spike_summary(view, METRIC)
    if sp is None:
        return []
    return [Finding(
        category="kl_spike", severity=sp.severity, first_step=sp.first_step,
        last_step=sp.last_step,
        summary=sp.text("isolated KL spike") + (": repeated instability."
                                                if sp.severity == "warning"
                                                else "; the level recovered."),
        evidence=sp.evidence(METRIC), actions=SPIKE_ACTIONS, metric=METRIC)]


DETECTORS = (Detector("kl_level", (METRIC,), _level, min_points=MIN_PTS),
             Detector("kl_spikes", (METRIC,), _spikes))

def _penalised(settings: Settings) -> bool:
    """Doubling beta does nothing when it is 0 (no reference model): lower the rate then."""
    return settings.get("beta") != 0


# The blow-up's first two actions: a stronger KL penalty, else a slower policy.
FIXES = {"kl_blowup": Fix("a stronger KL penalty (or a slower learning rate) keeps the policy "
                          "near the reference", (Scale("beta", 2, _penalised),
                                                 Scale("learning_rate", 0.5)))}
