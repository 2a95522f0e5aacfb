"""Reward hacking: one reward component rises while another falls over the same window.

Windows all start at the first step and end at increasing fractions of the run, so an
episode that later recovered (the falling component came back) is still reported, as info;
a fall that persists to the end of the run is a warning.
"""

from __future__ import annotations

import numpy as np

from app.diagnostics.detector import COMPONENTS, Detector
from app.diagnostics.detectors.common import NO_NOISE
from app.diagnostics.model import Finding
from app.diagnostics.stats import head, med, noise_sigma, r3, rho_crit, spearman, tail
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


def detect(view: View) -> list[Finding]:
    comps = {}
    for name in view.components():
        s, h = view.series(name), view.hist(name)
        if s is not None and len(s) >= MIN_PTS and h.gmax != h.gmin:
            comps[name] = s
    if len(comps) < 2:
        return []
    first = min(s.steps[0] for s in comps.values())
    last = max(s.steps[-1] for s in comps.values())
    scale = _scale(view, comps)
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
                if rho <= -crit and eff <= -EFFECT_SIGMA and -ch >= MIN_SHARE * scale]
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
    short = lambda n: n.split("/")[1]
    fmt = lambda m: {"rank_trend_rho": r3(m[0]), "change_in_noise_sigmas": r3(m[1]),
                     "change": r3(m[2])}
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


DETECTORS = (Detector("hacking", (COMPONENTS, "reward"), detect),)
