"""The robust statistics every detector leans on, checked to the digit on tiny arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.diagnostics.stats import (
    head,
    med,
    noise_sigma,
    r3,
    ranks,
    rho_crit,
    robust_sigma,
    rolling_median,
    run_start,
    spearman,
    tail,
)

A = np.array


def test_ranks_without_and_with_ties() -> None:
    assert ranks(A([30.0, 10.0, 20.0])).tolist() == [2.0, 0.0, 1.0]
    assert ranks(A([5.0, 1.0, 5.0, 3.0])).tolist() == [2.5, 0.0, 2.5, 1.0]
    assert ranks(A([2.0, 2.0, 2.0])).tolist() == [1.0, 1.0, 1.0]
    assert ranks(A([7.0])).tolist() == [0.0]
    assert ranks(A([1.0, 1.0, 0.0, 9.0, 9.0, 9.0])).tolist() == [1.5, 1.5, 0.0, 4.0, 4.0, 4.0]


def test_spearman() -> None:
    x = A([1.0, 2.0, 3.0, 4.0, 5.0])
    assert spearman(x, A([1.0, 4.0, 9.0, 16.0, 25.0])) == pytest.approx(1.0)
    assert spearman(x, A([5.0, 4.0, 3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    assert spearman(x, A([1.0, 3.0, 2.0, 5.0, 4.0])) == pytest.approx(0.8)
    assert spearman(x, A([2.0, 2.0, 2.0, 2.0, 2.0])) == 0.0  # constant: undefined -> 0
    assert spearman(A([1.0, 2.0]), A([1.0, 2.0])) == 0.0  # fewer than 3 points
    assert spearman(A([1.0, 2.0, 3.0]), A([3.0, 1.0, 2.0])) == pytest.approx(-0.5)
    # an x axis that is not strictly increasing is ranked too
    assert spearman(A([3.0, 1.0, 2.0, 2.0]), A([30.0, 10.0, 20.0, 20.0])) == pytest.approx(1.0)
    assert spearman(A([1.0, 1.0, 2.0]), A([1.0, 2.0, 3.0])) == pytest.approx(math.sqrt(3) / 2)


def test_rho_crit() -> None:
    assert rho_crit(5) == pytest.approx(1.645 / 2)
    assert rho_crit(101) == pytest.approx(0.1645)
    assert rho_crit(1) == pytest.approx(1.645) and rho_crit(0) == pytest.approx(1.645)
    assert rho_crit(2) == pytest.approx(1.645)


def test_med() -> None:
    assert med(A([3.0, 1.0, 2.0])) == 2.0
    assert med(A([4.0, 1.0, 3.0, 2.0])) == 2.5
    assert med(A([5.0])) == 5.0
    assert math.isnan(med(A([])))
    assert isinstance(med(A([1, 2])), float)


def test_robust_and_noise_sigma() -> None:
    assert robust_sigma(A([1.0, 2.0, 3.0, 4.0, 100.0])) == pytest.approx(1.4826)
    assert robust_sigma(A([])) == 0.0
    assert robust_sigma(A([5.0, 5.0, 5.0])) == 0.0
    # successive differences 1, -1, 1, -1: MAD 1 -> 1.4826 / sqrt 2
    assert noise_sigma(A([0.0, 1.0, 0.0, 1.0, 0.0])) == pytest.approx(1.4826 / math.sqrt(2))
    # a straight line has no point-to-point noise
    assert noise_sigma(A([0.0, 1.0, 2.0, 3.0, 4.0])) == 0.0
    assert noise_sigma(A([1.0, 3.0])) == pytest.approx(robust_sigma(A([1.0, 3.0])))
    assert noise_sigma(A([1.0, 3.0])) == pytest.approx(1.4826)


def test_head_and_tail_windows() -> None:
    steps = np.arange(0.0, 101.0, 10.0)  # 0, 10, ..., 100
    values = steps * 2
    assert head(steps, values, 0.2, 2).tolist() == [0.0, 20.0, 40.0]  # steps 0..20 inclusive
    assert tail(steps, values, 0.2, 2).tolist() == [160.0, 180.0, 200.0]  # steps 80..100
    assert head(steps, values, 0.0, 4).tolist() == [0.0, 20.0, 40.0, 60.0]  # at least 4
    assert tail(steps, values, 0.0, 4).tolist() == [140.0, 160.0, 180.0, 200.0]
    assert head(steps, values, 0.15, 1).tolist() == [0.0, 20.0]
    assert tail(steps, values, 0.15, 1).tolist() == [180.0, 200.0]
    assert head(A([]), A([]), 0.2, 3).tolist() == [] and tail(A([]), A([]), 0.2, 3).tolist() == []
    offset = steps + 1000  # windows are relative to the first step, not to zero
    assert head(offset, values, 0.2, 1).tolist() == [0.0, 20.0, 40.0]
    assert tail(offset, values, 0.2, 1).tolist() == [160.0, 180.0, 200.0]


def test_rolling_median() -> None:
    v = A([1.0, 9.0, 2.0, 8.0, 3.0])
    assert rolling_median(v, 3).tolist() == [1.0, 2.0, 8.0, 3.0, 3.0]
    assert rolling_median(v, 5).tolist() == [1.0, 2.0, 3.0, 3.0, 3.0]
    assert rolling_median(v, 1).tolist() == v.tolist()
    assert rolling_median(A([4.0, 1.0]), 5).tolist() == [4.0, 1.0]  # too short for a window
    assert rolling_median(A([5.0, 1.0, 5.0]), 9).tolist() == [5.0, 5.0, 5.0]  # width clipped to 3
    assert rolling_median(A([]), 3).tolist() == []
    out = rolling_median(v, 1)
    out[0] = 99.0
    assert v[0] == 1.0  # a copy, never the caller's array


def test_run_start() -> None:
    steps = A([10, 20, 30, 40, 50])
    assert run_start(steps, A([False, True, False, True, True])) == 40
    assert run_start(steps, A([True] * 5)) == 10
    assert run_start(steps, A([True, True, True, True, False])) is None
    assert run_start(A([]), A([], dtype=bool)) is None


def test_r3_keeps_four_significant_digits() -> None:
    assert r3(123456.0) == 123500.0
    assert r3(0.000123456) == 0.0001235
    assert r3(2.0) == 2.0 and r3(0.0) == 0.0
    assert r3(None) is None  # type: ignore[arg-type]
    assert math.isnan(r3(math.nan)) and r3(math.inf) == math.inf
