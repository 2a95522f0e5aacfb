"""Zero reward spread: most groups score all-equal, so advantages are 0 and nothing is learned.

Two ways to see it, both exact: ``frac_reward_zero_std`` (the share of groups with no spread,
newer TRL) or, for logs without it, ``reward_std == 0`` exactly (the mean within-group standard
deviation is 0 only when no group had any spread). The windowed judgement keeps a minimum span
for runs that hover near the threshold; an exact, total signal (>= 95% of groups on every one of
a handful of rows) needs no window: a 5-step smoke run with a constant reward is flagged at once.

Zero spread can also be intermittent: most steps exactly without spread, a few short excursions
between them that a rolling median keeps (issue 31). The share rule counts steps, not
windows: the share of steps with ``reward_std == 0`` (exactly: a tolerance would call a
small but real spread "none") or ``frac_reward_zero_std >= CRITICAL``, since the first step
from which most steps are like that. A log with neither metric (verl's ``critic/score/mean``)
still shows it when its reward never goes negative and is exactly 0 on most steps: a mean of 0
over non-negative rewards means every completion scored 0, so no group had spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import SMOOTH_PTS, recent
from app.diagnostics.fix import Fix, Scale
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3, rolling_median, run_start
from app.diagnostics.view import Series, View

METRIC = "frac_reward_zero_std"
REWARD_STD = "reward_std"
REWARD_MAX, REWARD_MIN = "reward_max", "reward_min"  # the batch's best and worst reward
# Derived when a row has reward_std: 1.0 on a step whose reward_std is exactly 0, else 0.0;
# a bucket's mean is then the share of its steps that had no spread in any group.
ZERO_STD_STEPS = "derived/reward_std_zero"
# Derived per row for the share rule: 1.0 when reward_std == 0 or frac_reward_zero_std >=
# CRITICAL on that step, and 1.0 when the reward itself is exactly 0 (used only for logs with
# no spread metric and a reward that is never negative).
ZERO_SPREAD_STEPS = "derived/zero_spread_step"
REWARD_ZERO_STEPS = "derived/reward_exact_zero"
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
MOST_SHARE = 0.6  # share rule: clearly most steps since the onset had no spread at all ...
RECENT_SHARE_FRAC = 0.5  # ... and most steps of the run's second half too (still going on)
SHARE_MIN_ROWS = 5  # a run of fewer rows is too short to say "most steps" (MIN_VERDICT_STEPS)
PIN_MIN_ROWS = 10  # pinned: the reward sat exactly at its lowest value on this many last rows,
PIN_SHARE = 0.5  # ... at least half of the run: a mean that is exactly the run's floor, row
#                  after row, means every completion scored the floor (issue 54: verl's score
#                  at exactly -1.0 for 250 steps, with no spread metric logged)

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
    "all_zero": ["Dry-run the reward functions on sample outputs: can they ever pay out?",
                 "Use easier prompts or a curriculum that starts easier",
                 "Add denser or shaped reward (partial credit, format reward)"],
}
WHAT = {"too_easy": "groups all pass (prompts too easy)",
        "too_hard": "groups all fail (prompts too hard)",
        "mixed": "groups all score the same (some all pass, some all fail)",
        "all_zero": "groups all score exactly 0 (no completion earns any reward: the task is "
                    "too hard for this model, or the reward can never pay out)"}


def _max_equals_min(cols: dict[str, tuple[np.ndarray, np.ndarray]]
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, flag) where the batch's best and worst reward were logged: equal means every
    completion of the step scored the same (issue 54: a loop printing min_reward == max_reward
    for 96 steps; verl's critic/score/max and /min)."""
    if REWARD_MAX not in cols or REWARD_MIN not in cols:
        return None
    (s_hi, v_hi), (s_lo, v_lo) = cols[REWARD_MAX], cols[REWARD_MIN]
    steps, i_hi, i_lo = np.intersect1d(s_hi, s_lo, return_indices=True)
    return (steps, v_hi[i_hi] == v_lo[i_lo]) if len(steps) else None


def derived_columns(cols: dict[str, tuple[np.ndarray, np.ndarray]]
                    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The zero-spread indicator of every row that logged ``reward_std`` (see ZERO_STD_STEPS),
    or, without it, the batch's best and worst reward."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    parts = []
    same = _max_equals_min(cols)
    if REWARD_STD in cols:
        steps, values = cols[REWARD_STD]
        out[ZERO_STD_STEPS] = (steps, (values == 0).astype(float))
        parts.append((steps, values == 0))
    elif same is not None:
        out[ZERO_STD_STEPS] = (same[0], same[1].astype(float))
        parts.append(same)
    if METRIC in cols:
        steps, values = cols[METRIC]
        parts.append((steps, values >= CRITICAL))
    if parts:
        out[ZERO_SPREAD_STEPS] = _union(parts)
    if "reward" in cols:
        steps, values = cols["reward"]
        out[REWARD_ZERO_STEPS] = (steps, (values == 0).astype(float))
    return out


def _union(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One indicator over the steps of every part: 1.0 where any part says "no spread"."""
    steps = np.unique(np.concatenate([s for s, _ in parts]))
    hit = np.zeros(len(steps), bool)
    for s, flag in parts:
        hit[np.searchsorted(steps, s)] |= flag
    return steps, hit.astype(float)


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
    rewards with negative values in their observed [min, max], except a level of exactly 0,
    which is "all_zero" (issue 54: ties at 0 at the top of a reward that went negative were
    "too easy"; a reward that is never negative tied at 0 stays "too hard": all fail).
    """
    r, h = view.series("reward"), view.hist("reward")
    if r is None or h is None or h.gmin is None:
        return "mixed", {}
    inside = r.between(lo_step, hi_step)
    level = med(inside.values) if len(inside) else med(r.values)
    if level == 0 and h.gmin < 0:  # a tie at exactly 0 of a reward that can go negative:
        return "all_zero", {"reward_level": 0.0}  # nothing earned, wherever 0 sits in range
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


def share_source(view: View) -> tuple[str, str] | None:
    """(per-step indicator, metric the finding names) for the share rule: the spread metrics
    when the log has one, else the reward pinned at exactly 0 when it is never negative."""
    h = view.hist(ZERO_SPREAD_STEPS)
    if h is not None and h.n_rows:
        return ZERO_SPREAD_STEPS, METRIC if view.hist(METRIC) is not None else REWARD_STD
    r, h = view.hist("reward"), view.hist(REWARD_ZERO_STEPS)
    if r is not None and r.gmin is not None and r.gmin >= 0 and h is not None and h.n_rows:
        return REWARD_ZERO_STEPS, "reward"
    return None


@dataclass(frozen=True)
class Share:
    """Steps without spread since ``start``: ``zero`` of ``rows``; ``recent`` is the share
    over the run's second half."""

    start: int
    zero: int
    rows: int
    recent: float

    @property
    def value(self) -> float:
        return self.zero / self.rows


def step_share(view: View, indicator: str) -> Share | None:
    """The share rule over the bucketed indicator (each bucket: steps and how many of them had
    no spread, so the counts are exact at any resolution): the earliest step from which most
    steps had no spread, when the run's second half is also mostly without spread."""
    h = view.hist(indicator)
    if h is None or len(h.cnt) == 0 or h.cnt.sum() < SHARE_MIN_ROWS:
        return None
    # each step counts 0 or 1 (clipped: a log that itself sends a key named like the
    # indicator must not make a count negative or infinite)
    at, rows = h.ssum / h.cnt, h.cnt
    zero = np.clip(np.nan_to_num(h.vsum), 0, rows)
    late = at >= at[-1] - RECENT_SHARE_FRAC * (at[-1] - at[0])
    recent = float(zero[late].sum() / rows[late].sum())
    suffix_zero, suffix_rows = np.cumsum(zero[::-1])[::-1], np.cumsum(rows[::-1])[::-1]
    onset = np.flatnonzero((suffix_zero >= MOST_SHARE * suffix_rows) & (zero >= 0.5 * rows))
    if recent < MOST_SHARE or len(onset) == 0:
        return None
    i = int(onset[0])
    if suffix_rows[i] < MIN_PTS:
        return None
    first = h.first_step if i == 0 else round(at[i])
    return Share(int(first), round(suffix_zero[i]), int(suffix_rows[i]), recent)


SHARE_WHAT = {METRIC: "(almost) no group had reward spread (frac_reward_zero_std >= {c:.0%})",
              REWARD_STD: "reward_std was exactly 0 (no group had any spread)",
              "reward": "the reward was exactly 0 (every completion scored 0, so no group "
                        "had any spread)"}


def _share_finding(view: View, indicator: str, source: str) -> Finding | None:
    share = step_share(view, indicator)
    if share is None:
        return None
    last = view.hist(indicator).last_step
    kind, ev = classify(view, share.start, last)
    what = SHARE_WHAT[source].format(c=CRITICAL)
    return Finding(
        category="zero_reward_spread",
        severity="critical" if share.value >= CRITICAL else "warning",
        first_step=share.start, last_step=last,
        summary=(f"On {share.zero} of {share.rows} steps since step {share.start} "
                 f"({share.value:.0%}) {what}"
                 + ("; only the steps between had some spread" if share.zero < share.rows
                    else "") + f": {WHAT[kind]}. Those steps give zero advantage and teach "
                 "nothing."),
        evidence={"zero_spread_step_share": r3(share.value), "rows": share.rows,
                  "steps_with_spread": share.rows - share.zero,
                  "second_half_share": r3(share.recent), "warning_from_share": MOST_SHARE,
                  "kind": kind, **ev, "exact_signal": True},
        actions=ACTIONS[kind], metric=source)


def pinned(view: View) -> Finding | None:
    """The reward exactly at its run minimum on every one of the last rows (at least
    PIN_MIN_ROWS and PIN_SHARE of the run): no completion scored above the floor."""
    h = view.hist("reward")
    if h is None or h.gmin is None or len(h.cnt) == 0 or h.gmax == h.gmin:
        return None
    at_floor = (h.vmin == h.gmin) & (h.vmax == h.gmin)
    first = len(at_floor) - int(np.argmin(at_floor[::-1])) if not at_floor.all() else 0
    rows = int(h.cnt[first:].sum())
    if not at_floor[-1] or rows < PIN_MIN_ROWS or rows < PIN_SHARE * h.n_rows:
        return None
    start = max(int(h.keys[first] * h.width), h.first_step)
    return Finding(
        category="zero_reward_spread", severity="critical", first_step=start,
        last_step=h.last_step,
        summary=(f"The reward sits exactly at its lowest value {h.gmin:.3g} on every one of the "
                 f"last {rows} logged steps (since step {start}): every completion scores the "
                 "floor, no group has spread, nothing is learned."),
        evidence={"pinned_reward": r3(h.gmin), "rows": rows, "kind": "too_hard",
                  "expected": "a reward that moves off its floor"},
        actions=ACTIONS["too_hard"], metric="reward")


def detect(view: View) -> list[Finding]:
    s, source = signal(view)
    found, exact = (None, False) if s is None else (_windowed(s), False)
    if s is not None and found is None:
        found, exact = _exact(s), True
    if found is None:
        picked = share_source(view)
        share = _share_finding(view, *picked) if picked else None
        share = share or (pinned(view) if s is None else None)
        return [share] if share else []
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


DETECTORS = (Detector("zero_spread", (METRIC, "reward", REWARD_STD, ZERO_STD_STEPS,
                                      ZERO_SPREAD_STEPS, REWARD_ZERO_STEPS, REWARD_MAX,
                                      REWARD_MIN), detect,
                      needs=(METRIC, REWARD_STD, REWARD_MAX)),)
def _group_can_split(evidence: dict) -> bool:
    """A larger group helps only where some completion earns something: not for groups that
    all tie at exactly 0 (issue 54)."""
    return evidence.get("kind") != "all_zero"


# A group twice as large is far likelier to hold both a pass and a fail (p^G + (1-p)^G falls
# with G), so more groups give an advantage; the dry run shows that share per group size.
FIXES = {"zero_reward_spread": Fix("doubling the group size makes a group with mixed outcomes "
                                   "likelier, so more groups teach something",
                                   (Scale("num_generations", 2),), helps=_group_can_split)}
