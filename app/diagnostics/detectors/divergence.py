"""Train/test divergence: the gap between train reward and the held-out score widens beyond
noise, whether eval falls or merely stays flat while train rises (issue 54).

Why a gap, not a fall: a run whose train reward climbs 8% -> 80% while its held-out accuracy
stays at 0% is learning something that does not transfer (its author called it reward hacking),
yet eval never falls. The two series are in their own units (a train reward with format bonuses,
an eval accuracy, an nDCG), so each is measured against its own noise: train must rise
significantly, and eval must fail to follow, gaining less than its own noise (flat or falling)
over the same window. The range starts where the gap starts to grow: at eval's best point when
eval rose first and then turned, else where train left its early level.
"""

from __future__ import annotations

import math

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import NO_NOISE
from app.diagnostics.model import Finding
from app.diagnostics.stats import (
    head,
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

MIN_EVAL_PTS = 4  # eval runs every N steps; fewer points cannot show a trend
MIN_TRAIN_PTS = 6
HALF = 0.5  # eval is compared half against half: it has few points
HALF_MIN_PTS = 2
TRAIN_THIRD = 1 / 3  # train's move: its last third against its first third (medians)
TRAIN_RISE_Z = 4.0  # train's rise in standard errors of the medians compared ...
TRAIN_RISE_SHARE = 0.25  # ... and at least a quarter of its own level (no micro-moves)
MEDIAN_VAR = 1.57  # variance of a median is ~pi/2 times that of a mean (normal noise)
EVAL_FOLLOW_SIGMA = 1.0  # eval "follows" when it gains more than its own noise ...
EVAL_FOLLOW_SHARE = 0.25  # ... and a quarter of its own early level (when that is not 0) ...
EVAL_FOLLOW_TRAIN = 0.1  # ... or a tenth of train's rise (the same units when eval scores the
#                          train reward on held-out prompts: 0.0008 next to 0.35 is not following)
GAP_START_SHARE = 0.25  # train has left its early level once a quarter of its rise is done

ACTIONS = ["Inspect train rollouts with high reward: is the reward being gamed?",
           "Fix the reward loophole so train reward tracks the real (test) objective",
           "Stop at the checkpoint with the best eval reward"]


def _ends(w: Series) -> tuple[float, float]:
    """Medians of train's first and last third over the window."""
    return (med(head(w.steps, w.values, TRAIN_THIRD, HALF_MIN_PTS)),
            med(tail(w.steps, w.values, TRAIN_THIRD, HALF_MIN_PTS)))


def _train_rise(w: Series) -> tuple[float, float, float]:
    """(rank rho, rise in standard errors, rise) of train over the eval window."""
    first = head(w.steps, w.values, TRAIN_THIRD, HALF_MIN_PTS)
    last = tail(w.steps, w.values, TRAIN_THIRD, HALF_MIN_PTS)
    rise = med(last) - med(first)
    se = (noise_sigma(w.values) or NO_NOISE) * math.sqrt(MEDIAN_VAR * (1 / len(first)
                                                                        + 1 / len(last)))
    return spearman(w.steps, w.values), rise / se, rise


def _eval_gain(e: Series) -> tuple[float, float, float]:
    """(rank rho, gain in its own noise sigmas, gain) of eval, second half against first."""
    sig = noise_sigma(e.values) or robust_sigma(e.values) or NO_NOISE
    gain = (med(tail(e.steps, e.values, HALF, HALF_MIN_PTS))
            - med(head(e.steps, e.values, HALF, HALF_MIN_PTS)))
    return spearman(e.steps, e.values), gain / sig, gain


def _follows(e: Series, gain_sigmas: float, gain: float, train_rise: float) -> bool:
    """Eval rose with train: more than its noise, and a real share of its early level or of
    train's rise (a frozen eval whose tiny wobble is many of its own tiny sigmas still does
    not follow)."""
    early = abs(med(head(e.steps, e.values, HALF, HALF_MIN_PTS)))
    return gain_sigmas > EVAL_FOLLOW_SIGMA and (early == 0 or gain >= EVAL_FOLLOW_SHARE * early
                                                or gain >= EVAL_FOLLOW_TRAIN * train_rise)


def gap_start(e: Series, w: Series, eval_fell: bool) -> int:
    """Where the gap starts to grow: eval's best point when eval turned down, never before
    train left its early level."""
    k = max(3, (len(w) // 10) | 1)
    smooth = rolling_median(w.values, k)
    lo, hi = _ends(w)
    climbed = run_start(w.steps, smooth >= lo + GAP_START_SHARE * (hi - lo)) or w.first
    if not eval_fell:
        return climbed
    peak = round(e.steps[int(np.argmax(rolling_median(e.values, 3)))])
    return max(peak, climbed) if peak < e.last else climbed


def detect(view: View) -> list[Finding]:
    e, r = view.series("eval_reward"), view.series("reward")
    if e is None or r is None or len(e) < MIN_EVAL_PTS:
        return []
    w = r.between(e.steps[0], e.steps[-1])
    if len(w) < MIN_TRAIN_PTS:
        return []
    rho_t, z_t, rise = _train_rise(w)
    first, last = _ends(w)
    level = max(abs(first), abs(last))
    if rho_t < rho_crit(len(w)) or z_t < TRAIN_RISE_Z or rise < TRAIN_RISE_SHARE * level:
        return []
    rho_e, gain_sigmas, gain = _eval_gain(e)
    if _follows(e, gain_sigmas, gain, rise):
        return []
    fell = gain_sigmas <= -EVAL_FOLLOW_SIGMA
    start = gap_start(e, w, fell)
    how = "falls" if fell else "stays flat"
    return [Finding(
        category="train_test_divergence", severity="warning", first_step=start,
        last_step=max(e.last, w.last),
        summary=(f"Train reward rises ({first:.3g} -> {last:.3g}) while eval reward {how} "
                 f"(steps {start}-{e.last}): the gap widens beyond noise, the policy learns "
                 "something that does not transfer — likely reward hacking."),
        evidence={"train_rank_trend_rho": r3(rho_t), "train_rise_in_std_errors": r3(z_t),
                  "eval_rank_trend_rho": r3(rho_e), "eval_gain_in_noise_sigmas": r3(gain_sigmas),
                  "eval_change": r3(gain), "eval_points": len(e),
                  "expected": "eval reward rising with train reward"},
        actions=ACTIONS, metric="eval_reward")]


DETECTORS = (Detector("divergence", ("eval_reward", "reward"), detect,
                      min_points=MIN_EVAL_PTS),)
