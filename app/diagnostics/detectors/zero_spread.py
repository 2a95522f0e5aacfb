"""Zero reward spread: most groups score all-equal, so advantages are 0 and nothing is learned."""

from __future__ import annotations

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import SMOOTH_PTS, recent
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3, rolling_median, run_start
from app.diagnostics.view import View

METRIC = "frac_reward_zero_std"
HIGH = 0.8  # >= 80% of groups give no gradient: the batch is mostly wasted
CRITICAL = 0.95  # essentially no group teaches anything
MIN_STEPS = 20  # the condition must hold over a window of steps, not one noisy row
MIN_PTS = 4
WINDOW_FRAC = 0.25  # "current" = last quarter of the run (at least MIN_PTS points)
EASY_POS, HARD_POS = 0.65, 0.35  # reward position in its range: near top = all pass
MID_POS = 0.5  # a reward that never moved has no position: call it mixed
PASS_REWARD = 1.0  # non-negative rewards: 1 is the usual "pass", so the range is [0, >= 1]
SMOOTH_LONG, LONG_PTS = 5, 10  # wider smoothing once there are enough points

ACTIONS = {
    "too_easy": ["Use harder prompts (filter out ones the model already solves every time)",
                 "Increase num_generations so some groups show a mix of outcomes",
                 "Use a finer-grained (denser) reward so near-misses and clean solves differ"],
    "too_hard": ["Use easier prompts or a curriculum that starts easier",
                 "Increase num_generations so a rare success appears in a group",
                 "Add denser or shaped reward (partial credit, format reward)",
                 "Dry-run the reward functions on sample outputs: do they ever vary?"],
    "mixed": ["Increase num_generations", "Make the reward denser (partial credit)",
              "Check the reward functions return variation on sample outputs"],
}


def classify(view: View, lo_step: float, hi_step: float) -> tuple[str, dict]:
    """All-pass (too easy) vs all-fail (too hard) from the reward's position in its range.

    Non-negative rewards are placed in [0, max(observed max, 1)] (typical pass/fail rewards);
    rewards with negative values in their observed [min, max].
    """
    r, h = view.series("reward"), view.hist("reward")
    if r is None or h is None or h.gmin is None:
        return "mixed", {}
    level = med(r.between(lo_step, hi_step).values) if len(r.between(lo_step, hi_step)) else med(r.values)
    lo, hi = (0.0, max(h.gmax, PASS_REWARD)) if h.gmin >= 0 else (h.gmin, h.gmax)
    pos = (level - lo) / (hi - lo) if hi > lo else MID_POS
    kind = "too_easy" if pos >= EASY_POS else "too_hard" if pos <= HARD_POS else "mixed"
    return kind, {"reward_level": r3(level), "reward_range": [r3(lo), r3(hi)],
                  "reward_position_in_range": r3(pos)}


def detect(view: View) -> list[Finding]:
    s = view.series(METRIC)
    if s is None or len(s) < MIN_PTS or s.span < MIN_STEPS:
        return []
    smooth = rolling_median(s.values, SMOOTH_LONG if len(s) >= LONG_PTS else SMOOTH_PTS)
    start = run_start(s.steps, smooth >= HIGH)
    current = med(recent(s, WINDOW_FRAC))
    if start is None or current < HIGH or s.last - start < MIN_STEPS:
        return []
    kind, ev = classify(view, start, s.last)
    severity = "critical" if current >= CRITICAL else "warning"
    what = {"too_easy": "groups all pass (prompts too easy)",
            "too_hard": "groups all fail (prompts too hard)",
            "mixed": "groups all score the same (some all pass, some all fail)"}[kind]
    return [Finding(
        category="zero_reward_spread", severity=severity, first_step=start, last_step=s.last,
        summary=(f"{current:.0%} of groups have zero reward spread since step {start}: {what}. "
                 "Those groups get zero advantage and teach nothing."),
        evidence={"frac_reward_zero_std_median": r3(current), "expected_below": HIGH,
                  "kind": kind, **ev},
        actions=ACTIONS[kind], metric=METRIC)]


DETECTORS = (Detector("zero_spread", (METRIC, "reward"), detect),)
