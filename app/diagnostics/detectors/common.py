"""Helpers several detectors share: is the reward improving, standard windows."""

from __future__ import annotations

import numpy as np

from app.diagnostics.stats import head, med, noise_sigma, rho_crit, spearman, tail
from app.diagnostics.view import Series, View

EARLY_FRAC = 0.15  # "early baseline" = first 15% of the observed steps ...
RECENT_FRAC = 0.2  # ... "recent level" = last 20%; both at least MIN_WINDOW_PTS points
MIN_WINDOW_PTS = 3
IMPROVE_SIGMA = 1.0  # gain of one noise sigma with a significant rank trend = improving


def early(s: Series) -> np.ndarray:
    return head(s.steps, s.values, EARLY_FRAC, MIN_WINDOW_PTS)


def recent(s: Series, frac: float = RECENT_FRAC) -> np.ndarray:
    return tail(s.steps, s.values, frac, MIN_WINDOW_PTS)


def trend(s: Series) -> tuple[float, float]:
    """(Spearman rho, critical rho) of a series against step."""
    return spearman(s.steps, s.values), rho_crit(len(s))


def improving(s: Series | None) -> bool:
    """Significant upward trend and a recent level at least a noise sigma above early."""
    if s is None or len(s) < 6:
        return False
    rho, crit = trend(s)
    sigma = noise_sigma(s.values) or 1e-12
    return rho >= crit and (med(recent(s)) - med(early(s))) >= IMPROVE_SIGMA * sigma


def task_reward(view: View) -> Series | None:
    """The total reward (``reward``); the sum of components when it is missing."""
    return view.series("reward")
