"""Reward collapse: the reward falls well below the best level it reached and stays there."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from app.diagnostics.detector import Detector
from app.diagnostics.detectors.common import NO_NOISE, early, recent
from app.diagnostics.history import MetricHistory
from app.diagnostics.model import Finding
from app.diagnostics.stats import med, noise_sigma, r3, rolling_median
from app.diagnostics.view import Series, View

METRIC = "reward"
MIN_PTS = 10
MIN_STEPS = 30
DROP_SIGMA = 3.0  # the smoothed best minus the recent level, in noise sigmas of a smoothed point
LOST_GAIN_FRAC = 0.5  # ... and at least half of what was gained since the start is gone
STAY_FRAC = 0.8  # 80% of recent smoothed points sit below the midpoint between best and now
#                   (smoothed: on a noisy reward single raw points cross it, issue 23)
POINT_NOISE_MIN = 2.0  # ... and at least two noise sigmas of a single point (issue 54): a
#                       smoothed median over many points has a tiny standard error, so a reward
#                       of 0.033 drifting to 0.023 under per-step noise of 0.015 passed the
#                       DROP_SIGMA test; a collapse is a move a person sees on the raw curve
SCALE_SHARE_MIN = 0.05  # ... and 5% of the reward's scale: [0, max(observed max, 1)] for a
#                        reward that is never negative (1 = the usual pass, as zero_spread reads
#                        it), its observed range otherwise; 0.047 -> 0.023 on a 0/1 reward is a
#                        run that never learned, not one that lost what it learned
PASS_REWARD = 1.0
CRITICAL_LOST_FRAC = 0.8  # critical: it fell most of the way back (>= 80% of the gain lost)
STAY_SIGMA = 3.0  # ... or their median sits this many standard errors below it
RECENT_FRAC = 0.15  # "now" = the last 15% of the run: short, so a fresh fall shows quickly
SMOOTH_DIV = 10  # smoothing window = a tenth of the points (odd, at least SMOOTH_MIN)
SMOOTH_MIN = 3
MEDIAN_VAR = 1.57  # variance of a median is ~pi/2 times that of a mean (normal noise)

ACTIONS = ["Find the step where it turned and inspect the rollouts around it",
           "Lower the learning rate; raise beta", "Resume from the best checkpoint",
           "Check for reward hacking or entropy collapse at the same steps"]


def _stays(s: Series, smooth: np.ndarray, rec: np.ndarray, mid: float) -> bool:
    """The recent level stays below the midpoint between the best and now: most smoothed
    recent points are below it, or the recent median is STAY_SIGMA of its own standard error
    below it (on a noisy reward single points cross the midpoint either way; issue 23)."""
    if (smooth[-len(rec):] < mid).mean() >= STAY_FRAC:
        return True
    se = (noise_sigma(s.values) or NO_NOISE) * math.sqrt(MEDIAN_VAR / len(rec))
    return mid - med(rec) >= STAY_SIGMA * se


def single_point_noise(h: MetricHistory) -> float:
    """One logged row's noise from the ranges inside the buckets: their mean over the mean
    range of n normal draws (Blom's 2 z((n - 3/8) / (n + 1/4))); 0 for an unbucketed history,
    whose points are rows. Why not the bucket means' noise scaled by sqrt(n): on a long trend
    their differences are the trend itself (a 20k-step ramp read as 0.3 of noise)."""
    if h.width == 1:
        return 0.0
    n = float(med(h.cnt))
    spread = 2 * NormalDist().inv_cdf((n - 0.375) / (n + 0.25)) if n >= 2 else 0.0
    return float(np.mean(h.vmax - h.vmin)) / spread if spread > 0 else 0.0


def reward_scale(view: View) -> float:
    """The reward's scale: [0, max(observed max, 1)] when it is never negative, else its
    observed range."""
    h = view.hist(METRIC)
    if h is None or h.gmin is None:
        return 0.0
    return max(h.gmax, PASS_REWARD) if h.gmin >= 0 else h.gmax - h.gmin


def detect(view: View) -> list[Finding]:
    s = view.series(METRIC)
    if s is None or len(s) < MIN_PTS or s.span + 1 < MIN_STEPS:
        return []  # too short: listed as unchecked with the reason (the declaration below)
    k = max(SMOOTH_MIN, (len(s) // SMOOTH_DIV) | 1)
    smooth = rolling_median(s.values, k)
    h = k // 2 if len(s) > 2 * (k // 2) + 1 else 0
    # The best level only where the median window is full: at the edges it repeats the end
    # values, and the noisy first points of a flat run would look like a peak.
    ib = h + int(smooth[h:len(smooth) - h].argmax())
    best, best_step = float(smooth[ib]), round(s.steps[ib])
    rec, base = recent(s, RECENT_FRAC), med(early(s))
    now = med(rec)
    # a single logged point's noise: a bucket mean of n rows is sqrt(n) quieter than one row
    bucket_sigma = noise_sigma(s.values) or NO_NOISE
    sigma = bucket_sigma * math.sqrt(MEDIAN_VAR / k)  # sd of a k-point median
    point_sigma = single_point_noise(view.hist(METRIC)) or bucket_sigma
    drop, gained = best - now, best - min(base, now)
    if (best_step >= s.steps[-len(rec)] or drop < DROP_SIGMA * sigma
            or drop < POINT_NOISE_MIN * point_sigma or drop < SCALE_SHARE_MIN * reward_scale(view)
            or drop < LOST_GAIN_FRAC * gained or not _stays(s, smooth, rec, best - drop / 2)):
        return []
    lost = drop / (best - base) if best > base else float("inf")
    # a real peak, not just the first points or a noise bump of the smoothed curve
    rose = best - base >= max(DROP_SIGMA * sigma, POINT_NOISE_MIN * point_sigma)
    severity = "critical" if now <= base or (rose and lost >= CRITICAL_LOST_FRAC) else "warning"
    return [Finding(
        category="reward_collapse", severity=severity, first_step=best_step, last_step=s.last,
        summary=(f"Reward fell from its best level {best:.3g} (step {best_step}) to {now:.3g} "
                 "and stays there" + (", below where it started." if now <= base else
                                      ", most of the way back to where it started."
                                      if severity == "critical" else ".")),
        evidence={"best_reward": r3(best), "best_step": best_step, "recent_reward": r3(now),
                  "early_reward": r3(base), "drop_in_noise_sigmas": r3(drop / sigma),
                  "share_of_gain_lost": r3(lost), "critical_from_share": CRITICAL_LOST_FRAC,
                  "expected_drop_sigmas_below": DROP_SIGMA},
        actions=ACTIONS, metric=METRIC)]


DETECTORS = (Detector("reward_collapse", (METRIC,), detect, min_steps=MIN_STEPS,
                      min_points=MIN_PTS),)
