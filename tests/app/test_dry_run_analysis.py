"""The dry run's analysis: the p^G + (1-p)^G table checked against a simulation, zero-spread
shares split into all-fail and all-pass, distributions and the verdict."""

from __future__ import annotations

import random

import pytest

from app.dryruns.analysis import analyse, group_size_advice, zero_spread_probability


def simulated_share(rates: list[float], g: int, trials: int, rng: random.Random) -> float:
    """Sample groups of g Bernoulli(p) outcomes for each prompt; the share with zero spread."""
    zero = 0
    for _ in range(trials):
        for p in rates:
            passed = sum(rng.random() < p for _ in range(g))
            zero += passed in (0, g)
    return zero / (trials * len(rates))


@pytest.mark.parametrize("rates", [[0.5], [0.1, 0.9], [0.0, 0.3, 0.75, 1.0], [0.05] * 3])
def test_group_size_table_matches_a_simulation(rates: list[float]) -> None:
    rng = random.Random(7)
    trials = 4000
    for row in group_size_advice(rates):
        g = row["group_size"]
        simulated = simulated_share(rates, g, trials, rng)
        # 4 standard errors of a share estimated from trials * len(rates) groups
        tolerance = 4 * (0.25 / (trials * len(rates))) ** 0.5
        assert abs(row["zero_spread_share"] - simulated) <= tolerance, (g, rates)
        assert row["zero_spread_share"] == pytest.approx(row["all_fail"] + row["all_pass"])


def test_zero_spread_probability_by_hand() -> None:
    assert zero_spread_probability(0.5, 2) == 0.5
    assert zero_spread_probability(0.5, 4) == 0.125
    assert zero_spread_probability(0.0, 8) == 1.0
    assert zero_spread_probability(0.9, 16) == pytest.approx(0.9 ** 16 + 0.1 ** 16)


def group(*scores: float, name: str = "r") -> dict:
    return {"prompt": "p", "completions": [{"text": "t", "rewards": {name: s}} for s in scores]}


def test_constant_reward_reports_no_variation() -> None:
    result = analyse({"weights": {"r": 1.0}, "groups": [group(0.5, 0.5, 0.5, 0.5)] * 3})
    assert result["zero_spread_share"] == 1.0 and result["verdict"] == "no_variation"
    assert "will not learn" in result["verdict_text"]
    assert result["zero_spread_all_fail"] == 1.0 and result["zero_spread_all_pass"] == 0.0
    assert result["rewards"]["r"]["std"] == 0.0
    assert [r["zero_spread_share"] for r in result["group_size_advice"]] == [1.0] * 4


def test_binary_reward_splits_fail_and_pass_and_advises_group_sizes() -> None:
    groups = [group(0, 0, 0, 0), group(1, 1, 1, 1), group(1, 0, 0, 0), group(1, 1, 0, 1)]
    result = analyse({"weights": {"r": 2.0}, "groups": groups})
    assert result["zero_spread_share"] == 0.5
    assert result["zero_spread_all_fail"] == 0.25 and result["zero_spread_all_pass"] == 0.25
    assert result["success_rates"] == [0.0, 1.0, 0.25, 0.75]
    assert result["verdict"] == "weak"
    at_2 = result["group_size_advice"][0]
    assert at_2["group_size"] == 2
    assert at_2["zero_spread_share"] == pytest.approx((1 + 1 + 0.625 + 0.625) / 4)
    dist = result["rewards"]["r"]
    assert (dist["min"], dist["max"], dist["mean"], dist["count"]) == (0, 1, 0.5, 16)
    assert dist["histogram"]["counts"][0] == 8 and dist["histogram"]["counts"][-1] == 8
    assert result["total"]["max"] == 2.0  # totals are weighted


def test_varied_reward_is_ok_and_a_raised_error_wins() -> None:
    groups = [group(0.1, 0.4, 0.9, 0.2), group(0.3, 0.8, 0.5, 0.6)]
    assert analyse({"weights": {"r": 1.0}, "groups": groups})["verdict"] == "ok"
    failed = analyse({"weights": {"r": 1.0}, "groups": [], "error": "Traceback ...\nBoom"})
    assert failed["verdict"] == "error" and failed["error"].endswith("Boom")
    assert failed["zero_spread_share"] is None
