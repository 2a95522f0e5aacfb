"""Real (tiny) GRPO training on a coding built-in: a proxy reward trains, the unit tests are
watched with weight 0, the sandbox's cost is a metric, eval logs the same rewards, and every
captured completion keeps why a code reward scored 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import tiny_spec
from worker.training.child import train

SPEC = tiny_spec(
    dataset="builtin:easy-python", max_steps=2, num_generations=4,
    per_device_train_batch_size=8, max_completion_length=16, rollout_groups=2,
    eval_split="test", eval_steps=2,
    rewards=[{"name": "code_block_count", "weight": 1.0, "params": {"count": 0}},
             {"name": "unit_tests", "weight": 0.0, "params": {"timeout": 3}},
             {"name": "constant", "weight": 0.0, "params": {"value": 3.0}}])


def test_monitor_only_rewards_are_logged_but_do_not_train(receiver, tmp_path: Path) -> None:
    train(SPEC, 21, receiver.url, "t", str(tmp_path))
    steps = {r["step"]: r["metrics"] for r in receiver.rows if "loss" in r["metrics"]}
    assert sorted(steps) == [1, 2]
    for m in steps.values():
        assert m["rewards/unit_tests/mean"] == 0.0  # random tokens are not working Python
        assert m["rewards/constant/mean"] == 3.0
        # The trained reward is the proxy alone: weight-0 rewards add nothing to it.
        assert m["reward"] == pytest.approx(m["rewards/code_block_count/mean"]) == 1.0
        assert 0 < m["sandbox/seconds_per_completion"] < 3
        assert m["sandbox/batch_seconds"] > 0
        assert m["sandbox/network_isolated"] == 1.0  # this host allows network namespaces
    evals = [r["metrics"] for r in receiver.rows if "eval_loss" in r["metrics"]]
    assert len(evals) == 1
    assert {"eval_rewards/unit_tests/mean", "eval_rewards/code_block_count/mean",
            "eval_sandbox/seconds_per_completion"} <= set(evals[0])

    with receiver.lock:
        rollouts = [s for r in receiver.requests for s in r["body"].get("rollouts", [])]
    completions = [c for s in rollouts for g in s["groups"] for c in g["completions"]]
    assert len(completions) == 2 * 2 * 4
    for c in completions:
        assert c["rewards"] == {"code_block_count": 1.0, "unit_tests": 0.0, "constant": 3.0}
        assert c["total"] == 1.0
        # Only the rewards that scored low explain themselves.
        assert set(c["reasons"]) == {"unit_tests"}
        assert c["reasons"]["unit_tests"].startswith(
            ("syntax error", "crashed", "no code found", "failed test", "timeout"))
