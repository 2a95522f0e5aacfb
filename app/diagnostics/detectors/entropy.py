"""Entropy collapse (far below its early baseline, staying there) and entropy blow-up.

A run too short for the windowed judgement (a smoke test of 10-20 steps, issue 31) is still
judged on an unmistakable collapse: entropy down to a tenth of where it started and staying
below half of it. The GRPO workflow says to catch this in the smoke test, before the full run.

A collapse is measured from where entropy started when it fell within the early window itself
(``starting_level``), and is a warning rather than critical while the reward (train or eval)
still improves: the run can still learn (issue 54: an author's best run, eval 0.03 -> 0.735,
entropy 0.46 -> 0.04).
"""

from __future__ import annotations

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import (
    early,
    improving,
    recent,
    settled_since,
    starting_level,
    task_reward,
)
from app.diagnostics.fix import Fix, Scale
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3, run_start
from app.diagnostics.view import Series, View

METRIC = "entropy"
MIN_PTS = 6
MIN_STEPS = 20
COLLAPSE_RATIO = 0.3  # recent below 30% of baseline: sampling is nearly deterministic
COLLAPSE_STAY = 0.5  # ... and every recent point stays below half the baseline
COLLAPSE_CRITICAL = 0.1
BLOWUP_RATIO = 2.0  # doubled entropy ...
BLOWUP_ABS = 1.0  # ... by at least a nat per token (small entropies double harmlessly)
BLOWUP_CRITICAL = 4.0
BLOWUP_STAY = 1.5  # ... and every recent point stays above 1.5x the baseline (no dip back)
SHORT_MIN_PTS = 5  # a shorter run (fewer points or steps) is judged on its ends only ...
SHORT_EDGE = 3  # ... the median of its first and of its last 3 rows ...
SHORT_RATIO = COLLAPSE_CRITICAL  # ... and only on a collapse to a tenth of its start

COLLAPSE_ACTIONS = ["Inspect rollouts for repetition or a degenerate template (reward hacking?)",
                    "Lower the learning rate", "Raise beta (KL penalty) or add an entropy bonus"]
BLOWUP_ACTIONS = ["Lower the learning rate", "Check clip ratios (epsilon) and beta",
                  "Inspect rollouts for gibberish; check sampling temperature"]


def detect(view: View) -> list[Finding]:
    s = view.series(METRIC)
    if s is None:
        return []
    if len(s) < MIN_PTS or s.span < MIN_STEPS:
        return short_collapse(s)
    base, now, tail_vals = med(early(s)), med(recent(s)), recent(s)
    if base <= 0:
        return []
    start_level = starting_level(s)
    if now <= COLLAPSE_RATIO * start_level:  # fell from where it started (first points)
        base = start_level
    for shifted in (s.values < COLLAPSE_STAY * base, s.values > BLOWUP_STAY * base):
        shift = settled_since(s, shifted)
        if shift is not None:  # a sudden shift: judge the points since, not the window
            now, tail_vals = med(shift[1]), shift[1]
    ratio = now / base
    ev = {"early_entropy": r3(base), "recent_entropy": r3(now), "ratio_to_early": r3(ratio)}
    if ratio <= COLLAPSE_RATIO and tail_vals.max() < COLLAPSE_STAY * base:
        start = run_start(s.steps, s.values < COLLAPSE_STAY * base) or s.first
        learning = improving(task_reward(view)) or improving(view.series("eval_reward"))
        return [Finding(
            category="entropy_collapse",
            severity="critical" if ratio <= COLLAPSE_CRITICAL and not learning else "warning",
            first_step=start, last_step=s.last,
            summary=(f"Entropy fell to {ratio:.0%} of its early level ({base:.3g} -> {now:.3g}) "
                     f"and stays there since step {start}: the policy stopped exploring."),
            evidence={**ev, "expected_ratio_above": COLLAPSE_RATIO, "reward_improving": learning},
            actions=COLLAPSE_ACTIONS, metric=METRIC)]
    if ratio >= BLOWUP_RATIO and now - base >= BLOWUP_ABS and tail_vals.min() > BLOWUP_STAY * base:
        start = run_start(s.steps, s.values > BLOWUP_STAY * base) or s.first
        return [Finding(
            category="entropy_blowup",
            severity="critical" if ratio >= BLOWUP_CRITICAL else "warning",
            first_step=start, last_step=s.last,
            summary=(f"Entropy rose {ratio:.1f}x above its early level ({base:.3g} -> "
                     f"{now:.3g}): completions are becoming random."),
            evidence={**ev, "expected_ratio_below": BLOWUP_RATIO},
            actions=BLOWUP_ACTIONS, metric=METRIC)]
    return []


def short_collapse(s: Series) -> list[Finding]:
    """A collapse within a run too short for the windows: the last rows' median at most
    SHORT_RATIO of the first rows' median, and every one of the last rows below half of it."""
    if len(s) < SHORT_MIN_PTS:
        return []
    base, now = med(s.values[:SHORT_EDGE]), med(s.values[-SHORT_EDGE:])
    if base <= 0 or now > SHORT_RATIO * base or s.values[-SHORT_EDGE:].max() >= COLLAPSE_STAY * base:
        return []
    start = run_start(s.steps, s.values < COLLAPSE_STAY * base) or s.first
    return [Finding(
        category="entropy_collapse", severity="critical", first_step=start, last_step=s.last,
        summary=(f"Entropy fell to {now / base:.0%} of where it started ({base:.3g} -> "
                 f"{now:.3g}) within {s.last - s.first + 1} steps and stays there since step "
                 f"{start}: the policy stopped exploring (caught in a short run)."),
        evidence={"early_entropy": r3(base), "recent_entropy": r3(now),
                  "ratio_to_early": r3(now / base), "short_run_rows": len(s),
                  "expected_ratio_above": SHORT_RATIO, "rows_at_each_end": SHORT_EDGE},
        actions=COLLAPSE_ACTIONS, metric=METRIC)]


DETECTORS = (Detector("entropy", (METRIC, "reward", "eval_reward"), detect),)
# The collapse's settings remedy (its first action is to read the rollouts): a slower policy.
FIXES = {"entropy_collapse": Fix("a lower learning rate slows the policy's collapse onto a few "
                                 "completions", (Scale("learning_rate", 0.5),))}
