"""Detector thresholds at their edges, each on a small run shaped for one rule."""

from __future__ import annotations

import numpy as np

from app.diagnostics import RunContext, diagnose


def run(n: int = 40, **cols) -> list[tuple[int, dict]]:
    rows = []
    for i in range(n):
        d = {"reward": 0.5 + 0.001 * i, "loss": 0.0}
        for name, values in cols.items():
            d[name] = float(values[i])
        rows.append((i + 1, d))
    return rows


def found(rows, category: str):
    return [f for f in diagnose(rows).findings if f.category == category]


def test_a_constant_component_is_dead_and_says_its_value() -> None:
    (f,) = found(run(10, **{"rewards/fmt/mean": np.full(10, 0.7)}), "dead_reward_component")
    assert (f.severity, f.first_step, f.last_step, f.metric) == ("info", 1, 10,
                                                                 "rewards/fmt/mean")
    assert f.evidence == {"component": "fmt", "constant_value": 0.7, "rows": 10,
                          "task_reward_at_floor": False}
    assert f.summary == ("Reward component 'fmt' was 0.7 on every step: it never varies, so "
                         "it contributes no learning signal.")


def test_a_component_moving_across_zero_is_alive() -> None:
    values = np.linspace(-1.0, 0.5, 10)
    assert found(run(10, **{"rewards/fmt/mean": values}), "dead_reward_component") == []


def test_a_component_needs_five_rows_to_be_called_dead() -> None:
    assert found(run(4, **{"rewards/fmt/mean": np.zeros(4)}), "dead_reward_component") == []
    assert found(run(5, **{"rewards/fmt/mean": np.zeros(5)}), "dead_reward_component")


def test_entropy_touching_half_the_baseline_is_not_a_collapse() -> None:
    entropy = np.array([1.0] * 10 + [0.2] * 30)
    entropy[-1] = 0.5  # one recent point exactly at half the early level
    assert found(run(40, entropy=entropy), "entropy_collapse") == []
    entropy[-1] = 0.49
    assert found(run(40, entropy=entropy), "entropy_collapse")


def test_a_small_entropy_doubling_is_not_a_blowup() -> None:
    entropy = np.array([0.3] * 10 + [0.7] * 30)  # x2.3 but only +0.4 nat
    assert found(run(40, entropy=entropy), "entropy_blowup") == []
    bigger = np.array([0.3] * 10 + [1.4] * 30)  # +1.1 nat
    assert found(run(40, entropy=bigger), "entropy_blowup")


def test_mean_length_at_the_cap_without_a_clipped_ratio() -> None:
    rows = run(20, **{"completions/mean_length": np.full(20, 90.0)})
    (f,) = [f for f in diagnose(rows, RunContext(max_completion_length=100)).findings
            if f.category == "truncation"]
    assert (f.severity, f.first_step, f.last_step, f.metric) == (
        "warning", 1, 20, "completions/mean_length")
    assert f.evidence == {"recent_mean_length": 90.0, "max_completion_length": 100,
                          "expected_below": 90.0, "length_grew": False}
    assert f.summary == ("Mean completion length 90 is at 90% of max_completion_length (100): "
                         "completions run into the cap. Length did not grow: the cap is too "
                         "short for these answers.")
    below = run(20, **{"completions/mean_length": np.full(20, 89.0)})
    assert not [f for f in diagnose(below, RunContext(max_completion_length=100)).findings
                if f.category in ("truncation", "length_explosion")]


def test_truncation_evidence_names_the_cap() -> None:
    rows = run(20, **{"completions/clipped_ratio": np.full(20, 0.6)})
    (f,) = [f for f in diagnose(rows, RunContext(max_completion_length=64)).findings
            if f.category == "truncation"]
    assert f.evidence == {"clipped_ratio_median": 0.6, "expected_below": 0.12,
                          "max_completion_length": 64, "length_grew": False}
    assert f.metric == "completions/clipped_ratio" and f.severity == "warning"


def test_a_fresh_state_is_healthy_with_no_findings() -> None:
    from app.diagnostics import DiagnosticsState

    st = DiagnosticsState.new()
    assert st.diagnosis.verdict == "healthy" and st.diagnosis.findings == []
