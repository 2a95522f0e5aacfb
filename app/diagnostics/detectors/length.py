"""Completion length: truncation (cut at the cap from the start), explosion (grew into the cap
or far past its start) and collapse (nothing left)."""

from __future__ import annotations

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import (
    MIN_TREND_PTS,
    SMOOTH_PTS,
    early,
    improving,
    recent,
    settled_since,
    starting_level,
    task_reward,
    trend,
)
from app.diagnostics.fix import AddReward, Fix, Scale, Settings
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, r3, rolling_median, run_start
from app.diagnostics.view import Series, View

LENGTH = "completions/mean_length"
CLIPPED = "completions/clipped_ratio"
MAX_LENGTH = "completions/max_length"
MIN_PTS = 4
MIN_STEPS = 10
TRUNC_WARN = 0.12  # an eighth of completions cut at the cap: reported whatever the length did
#                    (issue 54: 15-60% clipped in real runs went unreported next to the growth)
TRUNC_CRITICAL = 0.95
CAP_NEAR = 0.9  # mean length within 10% of the cap (when no clipped_ratio is logged)
CAP_HIT = 0.99  # the longest completion "reaches the cap" within 1% of it ...
AT_CAP_SHARE = 0.5  # ... on at least half of the recent steps
HALF_CAP = 0.5  # warning when the mean is also past half the cap: many are cut, not one
GROWTH = 2.0  # mean length doubled since the early steps, with a significant upward trend
GROWTH_CAP_WARN = 0.7  # ... and already past 70% of the cap -> warning even if reward rises
COLLAPSE_RATIO = 0.2  # below a fifth of the early length ...
COLLAPSE_STAY = 0.35  # ... and never back above 35% of it recently
COLLAPSE_CRITICAL_TOKENS = 8.0  # almost nothing left to score
SUDDEN_FROM = 0.7  # a sudden collapse goes from >= 70% of the early length ...
SUDDEN_PTS = 5  # ... to below COLLAPSE_STAY of it within this many logging steps
BENIGN_CLIPPED_BEFORE = 0.2  # benign: a fifth of completions were truncated early on ...
BENIGN_CLIPPED_AFTER = 0.05  # ... and (almost) none are now, while the reward improves
TRUNC_WINDOW = 0.25  # truncation "now" = the last quarter of the run
GROWTH_ONSET = 1 + (GROWTH - 1) / 2  # growth starts where length first passes halfway there

EXPLOSION_ACTIONS = ["Raise max_completion_length if answers legitimately need more room",
                     "Add a length penalty or reward termination",
                     "Check the EOS token / chat template so completions can stop"]
TRUNCATION_ACTIONS = ["Raise max_completion_length: answers are cut before they finish",
                      "Ask for shorter answers (system prompt, fewer reasoning steps)",
                      "Check the EOS token / chat template so completions can stop",
                      "Score truncated completions lower (or mask them) so cut text is not rewarded"]
COLLAPSE_ACTIONS = ["Inspect rollouts: are completions empty or a bare token?",
                    "Check for a reward that favours short output (length hacking)",
                    "Lower the learning rate"]


def _grew(view: View) -> bool:
    """Mean length doubled since the early steps with a significant upward trend: completions
    that reach the cap *because they grew* (an explosion), not ones cut from the start."""
    s = view.series(LENGTH)
    if s is None or len(s) < MIN_TREND_PTS or s.span < MIN_STEPS:
        return False
    base = med(early(s))
    rho, crit = trend(s)
    return base > 0 and med(recent(s)) >= GROWTH * base and rho >= crit


def _cut(view: View, metric: str, severity: str, start: int, last: int, what: str,
         evidence: dict) -> Finding:
    """Completions at the cap are ``truncation`` whether they got there by growing or were cut
    from the start (issue 54: the share cut is its own finding; the growth, when there is one,
    is ``length_explosion`` beside it). The remedy differs, so the summary says which."""
    grew = _grew(view)
    return Finding(
        category="truncation", severity=severity, first_step=start, last_step=last,
        summary=what + (" Length grew into the cap." if grew else
                        " Length did not grow: the cap is too short for these answers."),
        evidence={**evidence, "length_grew": grew},
        actions=EXPLOSION_ACTIONS if grew else TRUNCATION_ACTIONS, metric=metric)


def _clipped(view: View) -> list[Finding] | None:
    """The clipped ratio's judgement; None while it is too short to judge (the other signals
    of the cap then stand in, so a finding does not vanish when the ratio first appears)."""
    c, cap = view.series(CLIPPED), view.context.max_completion_length
    if c is None or len(c) < MIN_PTS or c.span < MIN_STEPS:
        return None
    now = med(recent(c, TRUNC_WINDOW))
    if now < TRUNC_WARN:
        return []
    smooth = rolling_median(c.values, SMOOTH_PTS)
    start = run_start(c.steps, smooth >= TRUNC_WARN) or c.first
    return [_cut(
        view, CLIPPED, "critical" if now >= TRUNC_CRITICAL else "warning", start, c.last,
        f"{now:.0%} of completions are truncated at max_completion_length since step "
        f"{start}: they do not terminate, so rewards score cut-off text.",
        {"clipped_ratio_median": r3(now), "expected_below": TRUNC_WARN,
         "max_completion_length": cap})]


def inferred_cap(view: View) -> float | None:
    """The length cap: the run's ``max_completion_length`` when known, else the value the
    longest completion sits at exactly (a whole number the per-step maximum equals on most of
    the recent steps: only a cap stops a maximum at one value)."""
    if view.context.max_completion_length:
        return float(view.context.max_completion_length)
    h = view.hist(MAX_LENGTH)
    if h is None or h.gmax is None or len(h.cnt) < MIN_PTS or h.gmax != round(h.gmax):
        return None
    late = h.vmax[-max(MIN_PTS, int(len(h.vmax) * TRUNC_WINDOW)):]
    return h.gmax if (late == h.gmax).mean() >= AT_CAP_SHARE else None


def _longest_at_cap(view: View) -> list[Finding]:
    """The longest completion reaches the cap on most recent steps: some completions of every
    batch are cut, whatever the mean length did (no clipped ratio logged)."""
    h, cap = view.hist(MAX_LENGTH), inferred_cap(view)
    if h is None or not cap or len(h.cnt) < MIN_PTS:
        return []
    late = h.vmax[-max(MIN_PTS, int(len(h.vmax) * TRUNC_WINDOW)):]
    share = float((late >= CAP_HIT * cap).mean())
    if share < AT_CAP_SHARE:
        return []
    at = h.vmax >= CAP_HIT * cap
    first = int(h.keys[int(np.argmax(at))] * h.width) if at.any() else h.first_step
    s = view.series(LENGTH)
    mean_share = med(recent(s)) / cap if s is not None and len(s) else None
    severity = "warning" if mean_share is None or mean_share >= HALF_CAP else "info"
    return [_cut(
        view, MAX_LENGTH, severity, max(first, h.first_step), h.last_step,
        f"The longest completion reaches the length cap ({cap:.0f}) on {share:.0%} of recent "
        "steps: some completions of every batch are cut off.",
        {"steps_at_cap_share": r3(share), "length_cap": cap,
         "recent_mean_length_share_of_cap": r3(mean_share) if mean_share else None})]


def _truncation(view: View) -> list[Finding]:
    found = _clipped(view)
    if found is not None:
        return found
    found = _longest_at_cap(view)
    if found:
        return found
    s, cap = view.series(LENGTH), view.context.max_completion_length
    if cap and s is not None and len(s) >= MIN_PTS and med(recent(s)) >= CAP_NEAR * cap:
        now = med(recent(s))
        return [_cut(
            view, LENGTH, "warning", s.first, s.last,
            f"Mean completion length {now:.0f} is at {now / cap:.0%} of max_completion_length "
            f"({cap}): completions run into the cap.",
            {"recent_mean_length": r3(now), "max_completion_length": cap,
             "expected_below": CAP_NEAR * cap})]
    return []


def _growth_and_collapse(view: View) -> list[Finding]:
    s = view.series(LENGTH)
    if s is None or len(s) < MIN_TREND_PTS or s.span < MIN_STEPS:
        return []
    base, now = med(early(s)), med(recent(s))
    if base <= 0:
        return []
    start_level = starting_level(s)
    if now <= COLLAPSE_RATIO * start_level:  # fell from where it started (first points)
        base = start_level
    ratio, cap = now / base, view.context.max_completion_length
    rising_reward = improving(task_reward(view))
    ev = {"early_mean_length": r3(base), "recent_mean_length": r3(now),
          "ratio_to_early": r3(ratio), "reward_improving": rising_reward}
    rho, crit = trend(s)
    if ratio >= GROWTH and rho >= crit:
        near_cap = bool(cap) and now >= GROWTH_CAP_WARN * cap
        severity = "warning" if near_cap or not rising_reward else "info"
        start = run_start(s.steps, s.values >= GROWTH_ONSET * base) or s.first
        return [Finding(
            category="length_explosion", severity=severity, first_step=start, last_step=s.last,
            summary=(f"Mean completion length grew {ratio:.1f}x ({base:.0f} -> {now:.0f})"
                     + (" while the reward is not improving." if not rising_reward
                        else " alongside a rising reward.")),
            evidence={**ev, "expected_ratio_below": GROWTH, "max_completion_length": cap},
            actions=EXPLOSION_ACTIONS, metric=LENGTH)]
    if ratio <= COLLAPSE_RATIO and recent(s).max() <= COLLAPSE_STAY * base:
        return [_collapse(view, s, base, now, ev)]
    shift = settled_since(s, s.values <= COLLAPSE_STAY * base)
    if shift is not None and med(shift[1]) <= COLLAPSE_RATIO * base:  # sudden: judge after it
        now = med(shift[1])
        ev = {**ev, "recent_mean_length": r3(now), "ratio_to_early": r3(now / base)}
        return [_collapse(view, s, base, now, ev)]
    return []


def _fall_points(s: Series, base: float) -> int:
    """Logging steps between the last point at >= SUDDEN_FROM of the early length and the
    first point after it at <= COLLAPSE_STAY of it (how fast the length fell)."""
    high = np.flatnonzero(s.values >= SUDDEN_FROM * base)
    if len(high) == 0:
        return len(s)
    low = np.flatnonzero(s.values[high[-1]:] <= COLLAPSE_STAY * base)
    return int(low[0]) if len(low) else len(s)


def _truncation_gone(view: View) -> bool:
    c = view.series(CLIPPED)
    if c is None or len(c) < MIN_PTS:
        return False
    return med(early(c)) >= BENIGN_CLIPPED_BEFORE and med(recent(c)) <= BENIGN_CLIPPED_AFTER


def _collapse(view: View, s: Series, base: float, now: float, ev: dict) -> Finding:
    """Length collapse: warning, critical when almost nothing is left; info when benign
    (truncation disappeared while the reward rose: the model learned to finish; or a gradual
    shortening that the reward rewards)."""
    rising, fall = ev["reward_improving"], _fall_points(s, base)
    sudden, finished = fall <= SUDDEN_PTS, _truncation_gone(view)
    if now <= COLLAPSE_CRITICAL_TOKENS:
        severity, why = "critical", ": almost nothing is left to score."
    elif rising and finished:
        severity, why = "info", (": truncation disappeared while the reward rose, so the model "
                                 "likely learned to finish (benign).")
    elif rising and not sudden:
        severity, why = "info", "; the reward still rises, so this may be benign."
    else:
        severity = "warning"
        why = (f" within {fall} logging steps: the model may have stopped writing its "
               "reasoning or format." if sudden else ".")
    start = run_start(s.steps, s.values <= COLLAPSE_STAY * base) or s.first
    return Finding(
        category="length_collapse", severity=severity, first_step=start, last_step=s.last,
        summary=(f"Completions shrank to {now / base:.0%} of their early length "
                 f"({base:.0f} -> {now:.0f}){why}"),
        evidence={**ev, "expected_ratio_above": COLLAPSE_RATIO, "fall_logging_steps": fall,
                  "sudden": sudden, "truncation_disappeared": finished},
        actions=COLLAPSE_ACTIONS, metric=LENGTH)

DETECTORS = (Detector("truncation", (CLIPPED, LENGTH, MAX_LENGTH), _truncation,
                      needs=(CLIPPED, LENGTH, MAX_LENGTH), min_points=MIN_PTS),
             Detector("length_level", (LENGTH, CLIPPED, "reward"), _growth_and_collapse,
                      min_points=MIN_TREND_PTS))


def _dapo_penalty_line(settings: Settings) -> str:
    """The overlong penalty as a TRL script adds it (trl.rewards, DAPO's soft punishment over
    the last fifth of the cap)."""
    cap = settings.get("max_completion_length")
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        return ("reward_funcs.append(get_soft_overlong_punishment(max_completion_len=<your "
                "max_completion_length>, soft_punish_cache=<a fifth of it>))")
    return (f"reward_funcs.append(get_soft_overlong_punishment(max_completion_len={cap}, "
            f"soft_punish_cache={max(1, round(cap / 5))}))")


# Truncation's first action; a length explosion's remedy is a length penalty: DAPO's overlong
# penalty (the catalog's overlong_penalty reward, TRL's get_soft_overlong_punishment).
FIXES = {"truncation": Fix("twice the room lets answers finish before the cap",
                           (Scale("max_completion_length", 2),)),
         "length_explosion": Fix("a penalty near the length cap makes growing past it stop "
                                 "paying, while answers of a normal length score as before",
                                 (AddReward("overlong_penalty", _dapo_penalty_line),))}
