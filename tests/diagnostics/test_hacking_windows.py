"""Reward hacking's per-component move: rank trend, change between the first and last third
(at least two points each, so sparse logging still compares like with like)."""

from __future__ import annotations

import numpy as np
import pytest

from app.diagnostics.detectors.hacking import _move, _scale
from app.diagnostics.history import MetricHistory
from app.diagnostics.model import RunContext
from app.diagnostics.stats import noise_sigma
from app.diagnostics.view import Series, View


def test_thirds_with_only_two_points_keep_two() -> None:
    late = np.array([0, 1, 2, 3, 4, 5, 9, 10], float)  # last third: steps 9 and 10 only
    rho, _, change = _move(Series(late, late.copy()))
    assert change == pytest.approx(9.5 - 1.5) and rho == pytest.approx(1.0)
    early = np.array([0, 1, 5, 6, 7, 8, 9, 10], float)  # first third: steps 0 and 1 only
    _, _, change = _move(Series(early, early.copy()))
    assert change == pytest.approx(8.5 - 0.5)


def test_effect_is_in_noise_sigmas() -> None:
    steps = np.arange(12, dtype=float)
    values = np.array([0.0, 1.0, 0.0, 3.0, 1.0, 0.0, 5.0, 7.0, 5.0, 6.0, 8.0, 5.0])
    rho, effect, change = _move(Series(steps, values))
    assert change == pytest.approx(5.5 - 0.5) and rho > 0.75
    assert effect == pytest.approx(change / noise_sigma(values))
    assert _move(Series(steps, np.full(12, 2.0))) == (0.0, 0.0, 0.0)


def test_the_yardstick_is_the_total_reward_from_eight_points() -> None:
    reward = MetricHistory()
    reward.add("reward", np.arange(1, 9), np.arange(8, dtype=float))  # exactly 8 points
    comps = {"rewards/a/mean": Series(np.arange(1.0, 9.0), np.linspace(0, 1, 8))}
    view = View({"reward": reward}, RunContext())
    assert _scale(view, comps) == pytest.approx(6.65 - 0.35)
    short = MetricHistory()
    short.add("reward", np.arange(1, 8), np.arange(7, dtype=float))  # 7: use the components
    assert _scale(View({"reward": short}, RunContext()), comps) == pytest.approx(0.9)
    assert _scale(View({}, RunContext()), comps) == pytest.approx(0.9)
