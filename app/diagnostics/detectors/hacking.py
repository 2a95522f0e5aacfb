"""Reward hacking: one reward component rises (or sits saturated) while another falls.

Two passes, whatever the total reward does (up, flat or down):
  * objective pass: the *objective* is a monitor-only component (weight 0 in
    ``context.reward_weights``: it is the objective by definition) or, without one, a
    component named like correctness/accuracy/pass/score/tests/answer. If, over a window that
    ends now, the objective falls (or goes negative) while another component rises or sits
    saturated at its maximum, the policy is being paid for something other than the task:
    a warning, from the step the objective started to fall.
  * any-pair pass: windows all start at the first step and end at increasing fractions of
    the run, so an episode that later recovered (the falling component came back) is still
    reported, as info; a fall that persists to the end of the run is a warning.
  * own-scale pass (issue 31), when the two above found nothing lasting: one component climbs
    to its ceiling while another falls steadily, each measured on its own range
    (``own_scale.py``), whatever their names and however large the total's spread.
A lasting finding next to a total reward without upward trend says so
(``explains_flat_total``): the flat total is the rise paying for the fall, and the diagnosis
drops "stalled" in its favour.
"""

from __future__ import annotations

import re

import numpy as np

from app.diagnostics.detector import COMPONENTS, Detector
from app.diagnostics.detectors import own_scale
from app.diagnostics.detectors.common import NO_NOISE, SMOOTH_PTS, improving
from app.diagnostics.model import Finding
from app.diagnostics.stats import (
    head,
    med,
    noise_sigma,
    r3,
    rho_crit,
    rolling_median,
    run_start,
    spearman,
    tail,
)
from app.diagnostics.view import Series, View

MIN_PTS = 8
MIN_STEPS = 20
END_FRACS = (0.3, 0.5, 0.75, 1.0)
EFFECT_SIGMA = 1.0  # the move must also be >= 1 noise sigma (third-to-third medians)
MIN_SHARE = 0.05  # ... and >= 5% of the total reward's spread: near-constant components
#                   (noise ~0) would otherwise make a 0.01 wobble look like many sigmas

THIRD = 1 / 3  # a component's move: last third against first third (medians)
THIRD_MIN_PTS = 2
SCALE_PCT = (5, 95)  # the total reward's spread, ignoring its most extreme 5% each side

# Objective pass
OBJECTIVE_NAME = re.compile(r"correct|accura|(^|_)acc(_|$)|pass|score|test|answer|solve|exact",
                            re.IGNORECASE)  # names that say "the task was done"
OBJECTIVE_FALL_SIGMA = 2.0  # a warning on its own, judged again at every update and over
#                              several windows: it needs a firmer fall than EFFECT_SIGMA
FIRM_RHO_FACTOR = 1.4  # falls need a firmer rank trend, one-sided 1% (z 2.33) not 5%: a
#                         healthy run fed live saw a 21-step accuracy wobble pass at 5%
OBJECTIVE_LOSS_SHARE = 0.3  # ...or lose this share of its own early level: a monitor-only
#                             objective is not part of the total reward, whose spread (the
#                             proxy's scale) says nothing about how much the objective lost
START_FRACS = (0.0, 0.25, 0.5)  # windows from here to the end: a late fall is not diluted
SATURATED_SHARE = 0.1  # "sits saturated": recent level within 10% of its range from its max
ONSET_SHARE = 0.2  # the fall starts where the objective first stays 20% of the way down
PERSIST_PTS = 4  # ... and stays down for at least this many logged points
SMOOTH_DIV = 10  # onset smoothing window = a tenth of the points (odd, at least SMOOTH_PTS)
ONSET_TOP_SHARE = 0.25  # the level the fall starts from: the best of the window's first quarter

ACTIONS = ["Inspect rollouts where the rising component scores high: is it a loophole?",
           "Fix the reward function's loophole (tighten regexes, require the real answer)",
           "Weight the task (accuracy) reward higher than the shaping/format reward"]


def _move(s: Series) -> tuple[float, float, float]:
    """(rho, effect in noise sigmas, absolute change) of one component over a window."""
    sigma = noise_sigma(s.values) or NO_NOISE
    change = (med(tail(s.steps, s.values, THIRD, THIRD_MIN_PTS))
              - med(head(s.steps, s.values, THIRD, THIRD_MIN_PTS)))
    return spearman(s.steps, s.values), change / sigma, change


def _scale(view: View, comps: dict[str, Series]) -> float:
    """Typical spread of the total reward (5th-95th percentile), the yardstick for MIN_SHARE."""
    r = view.series("reward")
    vals = r.values if r is not None and len(r) >= MIN_PTS else np.concatenate(
        [s.values for s in comps.values()])
    lo, hi = np.percentile(vals, SCALE_PCT)
    return float(hi - lo) or NO_NOISE


def _short(name: str) -> str:
    return name.split("/")[1]


def objectives(view: View, names: list[str]) -> list[str]:
    """Monitor-only components (weight 0) if the run has any, else correctness-like names."""
    weights = view.context.reward_weights or {}
    monitor = [n for n in names if weights.get(_short(n)) == 0]
    return monitor or [n for n in names if OBJECTIVE_NAME.search(_short(n))]


def _falls(w: Series, scale: float) -> bool:
    """Significant fall over the window: a rank trend and a noise sigma down, and either a
    real share of the reward's spread, a real share of the objective's own early level, or a
    crossing from non-negative to below zero."""
    rho, eff, ch = _move(w)
    if rho > -FIRM_RHO_FACTOR * rho_crit(len(w)) or eff > -OBJECTIVE_FALL_SIGMA:
        return False
    early = med(head(w.steps, w.values, THIRD, THIRD_MIN_PTS))
    crossed = early >= 0 > med(tail(w.steps, w.values, THIRD, THIRD_MIN_PTS))
    lost_share = early > 0 and -ch >= OBJECTIVE_LOSS_SHARE * early
    return -ch >= MIN_SHARE * scale or lost_share or crossed


def _rises_or_saturated(w: Series, full: Series, scale: float) -> str | None:
    rho, eff, ch = _move(w)
    if rho >= rho_crit(len(w)) and eff >= EFFECT_SIGMA and ch >= MIN_SHARE * scale:
        return "rises"
    lo, hi = float(full.values.min()), float(full.values.max())
    now = med(tail(w.steps, w.values, THIRD, THIRD_MIN_PTS))
    if hi > lo and now >= hi - SATURATED_SHARE * (hi - lo) and eff > -EFFECT_SIGMA:
        return "sits saturated"
    return None


def _onset(w: Series) -> int:
    """First step of the trailing stretch where the smoothed objective stays ONSET_SHARE of
    the way down from its window start to its level now."""
    k = max(SMOOTH_PTS, (len(w) // SMOOTH_DIV) | 1)
    smooth = rolling_median(w.values, k)
    top = float(smooth[: max(k, int(len(w) * ONSET_TOP_SHARE))].max())
    now = med(tail(w.steps, w.values, THIRD, THIRD_MIN_PTS))
    return run_start(w.steps, smooth <= top - ONSET_SHARE * (top - now)) or round(w.steps[0])


def _fmt(m: tuple[float, float, float]) -> dict:
    return {"rank_trend_rho": r3(m[0]), "change_in_noise_sigmas": r3(m[1]), "change": r3(m[2])}


def _objective_pass(view: View, comps: dict[str, Series], scale: float) -> list[Finding]:
    """The first objective that falls, over a window ending now, next to a rising or
    saturated proxy; its finding starts where the fall began."""
    for obj in objectives(view, sorted(comps)):
        o = comps[obj]
        for frac in START_FRACS:
            w = o.between(o.steps[0] + frac * o.span, o.steps[-1])
            if len(w) < MIN_PTS or w.span < MIN_STEPS or not _falls(w, scale):
                continue
            proxies = {n: how for n, s in comps.items() if n != obj and (
                how := _rises_or_saturated(s.between(w.steps[0], w.steps[-1]), s, scale))}
            start = _onset(w)
            if proxies and int((w.steps >= start).sum()) >= PERSIST_PTS:  # not a last blip
                return [_objective_finding(view, comps, obj, w, proxies, start, scale)]
    return []


def _objective_finding(view: View, comps: dict[str, Series], obj: str, w: Series,
                       proxies: dict[str, str], start: int, scale: float) -> Finding:
    rising = max(proxies, key=lambda n: med(comps[n].values))
    monitor = (view.context.reward_weights or {}).get(_short(obj)) == 0
    moves = {_short(n): {"how": how, **_fmt(_move(comps[n].between(w.steps[0], w.steps[-1])))}
             for n, how in proxies.items()}
    return Finding(
        category="reward_hacking", severity="warning", first_step=start,
        last_step=comps[obj].last,
        summary=(f"The objective '{_short(obj)}'" + (" (monitor-only)" if monitor else "")
                 + f" falls from step {start} while '{_short(rising)}' {proxies[rising]}: "
                 "the policy is paid for something other than the task."),
        evidence={"objective": _short(obj), "objective_is_monitor_only": monitor,
                  "falling": {_short(obj): _fmt(_move(w))}, "rising": moves,
                  "window_start": round(w.steps[0]), "min_change": r3(MIN_SHARE * scale)},
        actions=ACTIONS, metric=obj)


def detect(view: View) -> list[Finding]:
    comps = {}
    for name in view.components():
        s, h = view.series(name), view.hist(name)
        if s is not None and len(s) >= MIN_PTS and h.gmax != h.gmin:
            comps[name] = s
    if len(comps) < 2:
        return []
    scale = _scale(view, comps)
    found = _objective_pass(view, comps, scale) or _any_pair(comps, scale)
    if not found or found[0].severity == "info":
        found = _own_scale_pass(comps) or found
    return _explain_flat_total(view, found)


def _own_scale_pass(comps: dict[str, Series]) -> list[Finding]:
    """A component that climbed to its ceiling over the run, next to one that falls steadily
    over a window ending now (the earliest such window), each on its own scale."""
    risers = {n: m for n, s in comps.items()
              if (m := own_scale.climb(s)) is not None and own_scale.climbs_to_ceiling(m)}
    for frac in START_FRACS if risers else ():
        for name, s in sorted(comps.items()):
            w = s.between(s.steps[0] + frac * s.span, s.steps[-1])
            if name in risers or len(w) < MIN_PTS or w.span < MIN_STEPS:
                continue
            m = own_scale.move(w, s)
            start = _onset(w) if m is not None and own_scale.falls_steadily(m) else None
            if start is not None and int((w.steps >= start).sum()) >= PERSIST_PTS:
                return [_own_scale_finding(risers, name, m, start, s.last)]
    return []


def _own_scale_finding(risers: dict[str, own_scale.Move], falling: str, fall: own_scale.Move,
                       start: int, last: int) -> Finding:
    rising = max(risers, key=lambda n: risers[n].share)
    up = risers[rising]
    return Finding(
        category="reward_hacking", severity="warning", first_step=start, last_step=last,
        summary=(f"Reward component '{_short(rising)}' climbed to its ceiling "
                 f"(+{up.share:.0%} of its own range) while '{_short(falling)}' falls steadily "
                 f"from step {start} ({fall.share:.0%} of its own range): the policy may be "
                 f"exploiting '{_short(rising)}'."),
        evidence={"rising": {_short(n): {"how": "climbs to its ceiling", **m.evidence()}
                             for n, m in risers.items()},
                  "falling": {_short(falling): fall.evidence()},
                  "scaled_by": "each component's own range", "persists_to_end": True,
                  "rise_share_at_least": own_scale.RISE_SHARE,
                  "fall_share_at_least": own_scale.FALL_SHARE},
        actions=ACTIONS, metric=falling)


def _explain_flat_total(view: View, found: list[Finding]) -> list[Finding]:
    """Mark a lasting hacking finding next to a total reward without a trend either way: the flat
    total is explained (one component's rise pays for another's fall), not a stall."""
    total = view.series("reward")
    if (not found or found[0].severity == "info" or total is None or len(total) < MIN_PTS
            or improving(total) or spearman(total.steps, total.values) <= -rho_crit(len(total))):
        return found  # no total, or one that rises or falls: nothing flat to explain
    f = found[0]
    f.evidence = {**f.evidence, "explains_flat_total": True}
    f.summary += (" The total reward shows no upward trend because the rise pays for the "
                  "fall: the run is optimising the wrong thing, not merely stalled.")
    return found


def _any_pair(comps: dict[str, Series], scale: float) -> list[Finding]:
    first = min(s.steps[0] for s in comps.values())
    last = max(s.steps[-1] for s in comps.values())
    found, ups, downs = None, {}, {}
    for frac in END_FRACS:
        end = first + frac * (last - first)
        moves = {}
        for name, s in comps.items():
            w = s.between(first, end)
            if len(w) >= MIN_PTS and w.span >= MIN_STEPS:
                moves[name] = (*_move(w), rho_crit(len(w)))
        up = [n for n, (rho, eff, ch, crit) in moves.items()
              if rho >= crit and eff >= EFFECT_SIGMA and ch >= MIN_SHARE * scale]
        down = [n for n, (rho, eff, ch, crit) in moves.items()
                if rho <= -FIRM_RHO_FACTOR * crit and eff <= -EFFECT_SIGMA and -ch >= MIN_SHARE * scale]
        if up and down:
            found = (frac, end)
            ups.update({n: moves[n] for n in up})
            downs.update({n: moves[n] for n in down})
    if found is None:
        return []
    frac, end = found
    persistent = frac == END_FRACS[-1]
    rising = max(ups, key=lambda n: ups[n][2])
    falling = min(downs, key=lambda n: downs[n][2])
    short, fmt = _short, _fmt
    return [Finding(
        category="reward_hacking", severity="warning" if persistent else "info",
        first_step=int(first), last_step=round(end),
        summary=(f"Reward component '{short(rising)}' rises while '{short(falling)}' falls "
                 f"(steps {int(first)}-{round(end)})"
                 + (": the policy may be exploiting the rising reward." if persistent else
                    "; the falling component later recovered (mild/transient).")),
        evidence={"rising": {short(n): fmt(m) for n, m in ups.items()},
                  "falling": {short(n): fmt(m) for n, m in downs.items()},
                  "persists_to_end": persistent, "min_change": r3(MIN_SHARE * scale)},
        actions=ACTIONS, metric=falling)]


DETECTORS = (Detector("hacking", (COMPONENTS, "reward"), detect, min_points=MIN_PTS),)
