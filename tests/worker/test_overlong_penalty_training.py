"""The overlong penalty ("Try this fix" on a length explosion) trains under TRL's real
``GRPOTrainer``: TRL passes each completion's token ids to it and the component is logged like
any reward. (The cap's default, the run's ``max_completion_length``, is resolved in
``worker.rewards.registry.build``: tests/rewards/test_registry_values.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import tiny_spec
from worker.training.child import train


def test_the_overlong_penalty_scores_real_completions_by_their_tokens(
        receiver, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = tiny_spec(max_steps=1, max_completion_length=8, rewards=[
        {"name": "length_target", "weight": 1.0, "params": {"target": 20}},
        {"name": "overlong_penalty", "weight": 1.0,
         "params": {"max_length": 16, "soft_share": 1.0}}])
    train(spec, 41, receiver.url, "t", str(tmp_path))
    [step] = [r["metrics"] for r in receiver.rows if "loss" in r["metrics"]]
    # the seeded tiny random model never stops early: every completion has the 8 tokens of the
    # run's cap, and a ramp over all of 16 tokens scores (0 - 8) / 16
    assert (step["completions/min_length"], step["completions/max_length"]) == (8.0, 8.0)
    assert step["rewards/overlong_penalty/mean"] == -0.5
