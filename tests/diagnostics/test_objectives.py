"""Which reward component is the objective, and how far it must fall (issue 23: two gaps a
fresh audit found; each test here failed with its bug planted)."""

from __future__ import annotations

import numpy as np

from app.diagnostics import RunContext, diagnose
from app.diagnostics.model import Finding

STEPS = np.arange(1, 201)
T = STEPS / STEPS[-1]


def _rows(components: dict[str, np.ndarray], weights: dict[str, float]) -> list:
    """Rows with the total reward as the weighted sum (a weight-0 component is not in it)."""
    noise = np.random.default_rng(5)
    comps = {k: v + noise.normal(0, 0.01, len(STEPS)) for k, v in components.items()}
    total = sum(weights[k] * v for k, v in comps.items())
    return [(int(s), {"reward": float(total[i]),
                      **{f"rewards/{k}/mean": float(v[i]) for k, v in comps.items()}})
            for i, s in enumerate(STEPS)]


def _hacking(components: dict[str, np.ndarray], weights: dict[str, float]) -> list[Finding]:
    d = diagnose(_rows(components, weights), RunContext(reward_weights=weights))
    return [f for f in d.findings if f.category == "reward_hacking"]


def test_the_monitor_only_objective_wins_over_a_name_matched_one() -> None:
    """'judge' has weight 0 (monitor-only: the objective by definition) and a neutral name;
    'correctness' is named like an objective but is paid for and flat. The finding is about
    the judge, as the objective, not a generic pair of components."""
    weights = {"judge": 0.0, "correctness": 1.0, "format": 1.0}
    (f,) = _hacking({"judge": 0.8 - 0.5 * T, "correctness": np.full(len(T), 0.5),
                     "format": 0.1 + 0.8 * T}, weights)
    assert f.evidence["objective"] == "judge" and f.evidence["objective_is_monitor_only"]
    assert f.metric == "rewards/judge/mean" and f.severity == "warning"


def _objective_falls(start: float, end: float) -> list[Finding]:
    """A monitor-only objective moving linearly from start to end while a paid proxy rises
    0 -> 10: 5% of that spread (~0.45) is more than the objective's own moves below, so only
    its loss against its own early level can make it a fall."""
    weights = {"judge": 0.0, "style": 1.0}
    return _hacking({"judge": start + (end - start) * T, "style": 10 * T}, weights)


def test_an_objective_that_loses_less_than_30_percent_is_not_a_fall() -> None:
    assert _objective_falls(1.0, 0.8) == []  # -20%, stays positive


def test_an_objective_that_loses_more_than_30_percent_is_a_fall() -> None:
    (f,) = _objective_falls(1.0, 0.5)  # -50% end to end, about -36% third to third
    assert f.evidence["objective"] == "judge" and f.severity == "warning"


def test_a_negative_objective_falling_a_little_further_is_not_a_fall() -> None:
    """-1.0 -> -1.2: below zero from the start (no crossing), a small move: the share of its
    early level is meaningless for a negative level, so it must not count as a 30% loss."""
    assert _objective_falls(-1.0, -1.2) == []


def test_an_objective_that_crosses_zero_is_a_fall() -> None:
    (f,) = _objective_falls(0.15, -0.15)
    assert f.evidence["objective"] == "judge"
