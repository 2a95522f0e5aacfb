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
    r = np.empty(len(x), dtype=float)
    r[order] = np.arange(len(x), dtype=float)
    xs = x[order]
    if len(xs) > 1 and np.any(xs[1:] == xs[:-1]):
        _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=r)
        r = sums[inv] / counts[inv]
    return r


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation of y with x; 0 when undefined (constant input or < 3 points)."""
    if len(x) < 3:
        return 0.0
    rx, ry = ranks(np.asarray(x, float)), ranks(np.asarray(y, float))
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return 0.0
    return float(((rx - rx.mean()) * (ry - ry.mean())).mean() / (sx * sy))


def rho_crit(n: int) -> float:
    """|rho| above this is a significant (one-sided ~5%) monotone trend for n points."""
    return Z_ONE_SIDED_95 / math.sqrt(max(n - 1, 1))


def robust_sigma(values: np.ndarray) -> float:
    """1.4826 * MAD: a spread estimate that ignores outliers."""
    if len(values) == 0:
        return 0.0
    return float(MAD_TO_SIGMA * np.median(np.abs(values - np.median(values))))


def noise_sigma(values: np.ndarray) -> float:
    """Point-to-point noise from successive differences (insensitive to slow trends)."""
    if len(values) < 3:
        return robust_sigma(values)
    d = np.diff(values)
    return float(MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0))


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
    """Centred rolling median of odd width k (edges use the available points)."""
    n = len(values)
    if n == 0 or k <= 1:
        return values.copy()
    h = k // 2
    padded = np.concatenate([np.full(h, np.nan), values, np.full(h, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * h + 1)
    return np.nanmedian(windows, axis=1)


def run_start(steps: np.ndarray, mask: np.ndarray) -> int | None:
    """First step of the trailing run of True in ``mask`` (None if the last point is False)."""
    if len(mask) == 0 or not mask[-1]:
        return None
    false_idx = np.flatnonzero(~mask)
    start = int(false_idx[-1]) + 1 if len(false_idx) else 0
    return int(steps[start])


def med(values: np.ndarray) -> float:
    """Median as a float (nan for empty input)."""
    return float(np.median(values)) if len(values) else float("nan")


def r3(x: float) -> float:
    """Round for evidence dicts: 4 significant digits is what a person reads."""
    if x is None or not math.isfinite(x) or x == 0:
        return x
    return float(f"{x:.4g}")
