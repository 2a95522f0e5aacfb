"""Zero reward spread: most groups score all-equal, so advantages are 0 and nothing is learned.

Two ways to see it, both exact: ``frac_reward_zero_std`` (the share of groups with no spread,
newer TRL) or, for logs without it, ``reward_std == 0`` exactly (the mean within-group standard
deviation is 0 only when no group had any spread). The windowed judgement keeps a minimum span
for runs that hover near the threshold; an exact, total signal (>= 95% of groups on every one of
a handful of rows) needs no window: a 5-step smoke run with a constant reward is flagged at once.
"""

from __future__ import annotations

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import SMOOTH_PTS, recent
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3, rolling_median, run_start
from app.diagnostics.view import Series, View

METRIC = "frac_reward_zero_std"
REWARD_STD = "reward_std"
# Derived when a row has reward_std: 1.0 on a step whose reward_std is exactly 0, else 0.0;
# a bucket's mean is then the share of its steps that had no spread in any group.
ZERO_STD_STEPS = "derived/reward_std_zero"
HIGH = 0.8  # >= 80% of groups give no gradient: the batch is mostly wasted
CRITICAL = 0.95  # essentially no group teaches anything
MIN_STEPS = 20  # the condition must hold over a window of steps, not one noisy row
MIN_PTS = 4
FAST_ROWS = 3  # an exact, total signal on this many consecutive rows needs no window ...
FAST_SHARE = 0.5  # ... when those rows are at least half of the run so far (not a late blip)
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
WHAT = {"too_easy": "groups all pass (prompts too easy)",
        "too_hard": "groups all fail (prompts too hard)",
        "mixed": "groups all score the same (some all pass, some all fail)"}


def derived_columns(cols: dict[str, tuple[np.ndarray, np.ndarray]]
                    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The zero-spread indicator of every row that logged ``reward_std`` (see ZERO_STD_STEPS)."""
    if REWARD_STD not in cols:
        return {}
    steps, values = cols[REWARD_STD]
    return {ZERO_STD_STEPS: (steps, (values == 0).astype(float))}


def signal(view: View) -> tuple[Series | None, str]:
    """(series of the share of groups without spread, the metric it comes from):
    ``frac_reward_zero_std`` when logged, else the reward_std == 0 indicator."""
    s = view.series(METRIC)
    if s is not None:
        return s, METRIC
    return view.series(ZERO_STD_STEPS), REWARD_STD


def classify(view: View, lo_step: float, hi_step: float) -> tuple[str, dict]:
    """All-pass (too easy) vs all-fail (too hard) from the reward's position in its range.

    Non-negative rewards are placed in [0, max(observed max, 1)] (typical pass/fail rewards);
    rewards with negative values in their observed [min, max].
    """
    r, h = view.series("reward"), view.hist("reward")
    if r is None or h is None or h.gmin is None:
        return "mixed", {}
    inside = r.between(lo_step, hi_step)
    level = med(inside.values) if len(inside) else med(r.values)
    lo, hi = (0.0, max(h.gmax, PASS_REWARD)) if h.gmin >= 0 else (h.gmin, h.gmax)
    pos = (level - lo) / (hi - lo) if hi > lo else MID_POS
    kind = "too_easy" if pos >= EASY_POS else "too_hard" if pos <= HARD_POS else "mixed"
    return kind, {"reward_level": r3(level), "reward_range": [r3(lo), r3(hi)],
                  "reward_position_in_range": r3(pos)}


def _windowed(s: Series) -> tuple[int, float] | None:
    """(start, current share) when the share has stayed high over a real window of steps."""
    if len(s) < MIN_PTS or s.span < MIN_STEPS:
        return None
    smooth = rolling_median(s.values, SMOOTH_LONG if len(s) >= LONG_PTS else SMOOTH_PTS)
    start = run_start(s.steps, smooth >= HIGH)
    current = med(recent(s, WINDOW_FRAC))
    if start is None or current < HIGH or s.last - start < MIN_STEPS:
        return None
    return start, current


def _exact(s: Series) -> tuple[int, float] | None:
    """(start, current share) when the last FAST_ROWS rows or more all had (almost) no group
    with spread and they are most of the run: no window is needed for an exact, total signal."""
    start = run_start(s.steps, s.values >= CRITICAL)
    if start is None:
        return None
    rows = int((s.steps >= start).sum())
    if rows < FAST_ROWS or rows < FAST_SHARE * len(s):
        return None
    return start, med(s.values[s.steps >= start])


def detect(view: View) -> list[Finding]:
    s, source = signal(view)
    if s is None:
        return []
    found, exact = _windowed(s), False
    if found is None:
        found, exact = _exact(s), True
    if found is None:
        return []
    start, current = found
    kind, ev = classify(view, start, s.last)
    severity = "critical" if current >= CRITICAL else "warning"
    share = (f"{current:.0%} of groups have zero reward spread" if source == METRIC else
             f"reward_std is exactly 0 (no group had any spread) on "
             f"{float(s.values[s.steps >= start].mean()):.0%} of steps")
    return [Finding(
        category="zero_reward_spread", severity=severity, first_step=start, last_step=s.last,
        summary=(f"{share} since step {start}: {WHAT[kind]}. "
                 "Those groups get zero advantage and teach nothing."),
        evidence={f"{'frac_reward_zero_std' if source == METRIC else 'zero_std_steps'}_median":
                  r3(current), "expected_below": HIGH, "kind": kind, **ev,
                  **({"exact_signal": True, "rows": int((s.steps >= start).sum()),
                      "judged_from_rows": FAST_ROWS} if exact else {})},
        actions=ACTIONS[kind], metric=source)]


DETECTORS = (Detector("zero_spread", (METRIC, "reward", REWARD_STD, ZERO_STD_STEPS), detect,
                      needs=(METRIC, REWARD_STD)),)
