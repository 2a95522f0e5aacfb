"""Reward components measured on their own scales: does one climb to its ceiling while another
falls steadily? (issue 31)

Why a second yardstick: the hacking passes in ``hacking.py`` measure each component's move
against the total reward's spread. When the total is dominated by a large, noisy component
(a length penalty, a judge score in other units) a format reward that climbs from 0 to 1 and
an accuracy that falls from 0.6 to 0.3 are both "small", the weighted total shows no trend, and
the run looked "stalled". Here each component is scaled by the range of its own segment medians,
whatever its name and units, and a move must also be significant against its own noise (the
standard error of the medians compared, not of a single point), so a wobble never qualifies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.diagnostics.detectors.common import NO_NOISE
from app.diagnostics.stats import (
    head,
    med,
    noise_sigma,
    r3,
    rho_crit,
    spearman,
    tail,
)
from app.diagnostics.view import Series

THIRD, THIRD_MIN_PTS = 1 / 3, 2  # a move: the last third against the first third (medians)
START_SHARE = 0.1  # a climb: the last third against the first tenth (issue 54: a format
#                    reward that saturates within the first tenth has its first third at the
#                    ceiling already, and its climb measured third-to-third is nothing)
CLEAR_Z = 2 * 4.0  # a climb this many standard errors high needs no rank trend over the run
#                    (a saturated riser is flat noise after its climb: no trend to rank)
SEGMENTS, SEGMENT_MIN_PTS = 6, 3  # own range: medians of up to 6 segments of >= 3 points
MEDIAN_VAR = 1.57  # variance of a median is ~pi/2 times that of a mean (normal noise)
RISE_SHARE = 0.5  # the riser gained at least half of its own range ...
CEILING_SHARE = 0.2  # ... and its level now is within a fifth of its range from its maximum
FALL_SHARE = 0.4  # the faller lost at least 40% of its own range over the window ...
FIRM_RHO_FACTOR = 1.4  # ... with a firm rank trend (one-sided 1%, as hacking.py's falls)
MOVE_Z = 4.0  # both moves at least 4 standard errors of the medians compared
MIN_LEVEL_SHARE = 0.05  # the rise: at least 5% of the riser's largest |level| (no micro-moves)
FALL_LEVEL_SHARE = 0.3  # the fall: at least 30% of the faller's early |level|, the bar the
#                         objective pass sets (hacking.OBJECTIVE_LOSS_SHARE): a steady 20% dip
#                         of a score next to a climbing proxy is not yet a fall


@dataclass(frozen=True)
class Move:
    """One component's move over a window: rank trend, change (raw and as a share of its own
    range), significance, and where its level now sits in its own range (1.0 = its maximum)."""

    rho: float
    crit: float
    change: float
    share: float
    z: float
    position: float
    level: float  # largest |level| of its segment medians
    early: float  # median of the window's first third

    def evidence(self) -> dict:
        return {"rank_trend_rho": r3(self.rho), "change": r3(self.change),
                "change_in_own_range": r3(self.share), "change_in_std_errors": r3(self.z),
                "level_in_own_range": r3(self.position)}


def own_range(s: Series) -> tuple[float, float]:
    """(lowest, highest) median of the component's consecutive segments: its own range with
    the noise averaged out (the extremes of a rolling median still ride on the noise)."""
    n_seg = max(2, min(SEGMENTS, len(s) // SEGMENT_MIN_PTS))
    levels = [med(part) for part in np.array_split(s.values, n_seg)]
    return float(min(levels)), float(max(levels))


def move(w: Series, full: Series, first_share: float = THIRD) -> Move | None:
    """The move of ``w`` (a window of ``full``) on ``full``'s own scale, its last third against
    its first ``first_share``; None when flat."""
    lo, hi = own_range(full)
    if hi <= lo:
        return None
    first = head(w.steps, w.values, first_share, THIRD_MIN_PTS)
    last = tail(w.steps, w.values, THIRD, THIRD_MIN_PTS)
    change = med(last) - med(first)
    se = (noise_sigma(full.values) or NO_NOISE) * math.sqrt(
        MEDIAN_VAR * (1 / len(first) + 1 / len(last)))
    return Move(spearman(w.steps, w.values), rho_crit(len(w)), change, change / (hi - lo),
                change / se, (med(last) - lo) / (hi - lo), max(abs(lo), abs(hi)), med(first))


def climb(s: Series) -> Move | None:
    """A component's climb over the whole run: from its first tenth to its last third."""
    return move(s, s, START_SHARE)


def climbs_to_ceiling(m: Move) -> bool:
    return ((m.rho >= m.crit or m.z >= CLEAR_Z) and m.share >= RISE_SHARE and m.z >= MOVE_Z
            and m.position >= 1 - CEILING_SHARE and m.change >= MIN_LEVEL_SHARE * m.level)


def falls_steadily(m: Move) -> bool:
    return (m.rho <= -FIRM_RHO_FACTOR * m.crit and m.share <= -FALL_SHARE and m.z <= -MOVE_Z
            and -m.change >= FALL_LEVEL_SHARE * abs(m.early))
