"""Robust statistics shared by detectors: medians/MAD, rank trends, step windows.

Everything works on small arrays (the bounded history), so O(n log n) is fine.
"""

from __future__ import annotations

import math

import numpy as np

MAD_TO_SIGMA = 1.4826  # MAD of a normal sample times this estimates its standard deviation
Z_ONE_SIDED_95 = 1.645  # one-sided 5% test for rank trends


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank), as Spearman needs."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    r = np.empty(len(x), dtype=float)
    if len(xs) > 1 and (xs[1:] == xs[:-1]).any():
        _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
        cum = np.cumsum(counts)
        r = (cum - (counts - 1) / 2.0 - 1.0)[inv]
    else:
        r[order] = np.arange(len(x), dtype=float)
    return r


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation of y with x; 0 when undefined (constant input or < 3 points).

    x is normally the (strictly increasing) step axis, whose ranks are just 0..n-1.
    """
    n = len(x)
    if n < 3:
        return 0.0
    x, y = np.asarray(x, float), np.asarray(y, float)
    rx = np.arange(n, dtype=float) if (np.diff(x) > 0).all() else ranks(x)
    ry = ranks(y)
    rx = rx - rx.mean()
    ry = ry - ry.mean()
    den = math.sqrt(float(np.dot(rx, rx)) * float(np.dot(ry, ry)))
    return float(np.dot(rx, ry) / den) if den > 0 else 0.0


def rho_crit(n: int) -> float:
    """|rho| above this is a significant (one-sided ~5%) monotone trend for n points."""
    return Z_ONE_SIDED_95 / math.sqrt(max(n - 1, 1))


def med(values: np.ndarray) -> float:
    """Median as a float (nan for empty input); sort-based, much cheaper than np.median
    on the small arrays detectors use (this runs thousands of times per update)."""
    n = len(values)
    if n == 0:
        return float("nan")
    s = np.sort(values)
    h = n // 2
    return float(s[h]) if n % 2 else float(0.5 * (s[h - 1] + s[h]))


def robust_sigma(values: np.ndarray) -> float:
    """1.4826 * MAD: a spread estimate that ignores outliers."""
    if len(values) == 0:
        return 0.0
    return MAD_TO_SIGMA * med(np.abs(values - med(values)))


def noise_sigma(values: np.ndarray) -> float:
    """Point-to-point noise from successive differences (insensitive to slow trends)."""
    if len(values) < 3:
        return robust_sigma(values)
    return robust_sigma(np.diff(values)) / math.sqrt(2.0)


def head(steps: np.ndarray, values: np.ndarray, frac: float, min_pts: int) -> np.ndarray:
    """Values in the first ``frac`` of the step span (at least ``min_pts`` points)."""
    if len(steps) == 0:
        return values
    cut = steps[0] + frac * (steps[-1] - steps[0])
    n = max(int(np.searchsorted(steps, cut, side="right")), min_pts)
    return values[:n]


def tail(steps: np.ndarray, values: np.ndarray, frac: float, min_pts: int) -> np.ndarray:
    """Values in the last ``frac`` of the step span (at least ``min_pts`` points)."""
    if len(steps) == 0:
        return values
    cut = steps[-1] - frac * (steps[-1] - steps[0])
    n = max(len(steps) - int(np.searchsorted(steps, cut, side="left")), min_pts)
    return values[-n:]


def rolling_median(values: np.ndarray, k: int) -> np.ndarray:
    """Centred rolling median of odd width k; edges repeat the end values."""
    n = len(values)
    if n == 0 or k <= 1:
        return values.copy()
    h = min(k // 2, max((n - 1) // 2, 0))
    if h == 0:
        return values.copy()
    padded = np.concatenate([np.full(h, values[0]), values, np.full(h, values[-1])])
    windows = np.sort(np.lib.stride_tricks.sliding_window_view(padded, 2 * h + 1), axis=1)
    return windows[:, h]


def run_start(steps: np.ndarray, mask: np.ndarray) -> int | None:
    """First step of the trailing run of True in ``mask`` (None if the last point is False)."""
    if len(mask) == 0 or not mask[-1]:
        return None
    false_idx = np.flatnonzero(~mask)
    start = int(false_idx[-1]) + 1 if len(false_idx) else 0
    return int(steps[start])


def r3(x: float) -> float:
    """Round for evidence dicts: 4 significant digits is what a person reads."""
    if x is None or not math.isfinite(x) or x == 0:
        return x
    return float(f"{x:.4g}")
