"""The run spec accepts what TRL can run and rejects, per field, what it can't."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grpodeck.contract.spec import RunSpec


def errors_of(**data) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as info:
        RunSpec.model_validate(data)
    return {str(e["loc"][0]) if e["loc"] else "_": e["msg"] for e in info.value.errors()}


def test_defaults_are_valid_and_use_the_seed_length_reward() -> None:
    spec = RunSpec()
    assert spec.model == "builtin:smollm2-135m-instruct"
    assert spec.rewards[0].name == "length_target" and spec.rewards[0].params == {"target": 20}
    assert spec.batch_size == spec.num_generations


@pytest.mark.parametrize("field,value", [
    ("num_generations", 1), ("learning_rate", -1e-5), ("learning_rate", 0), ("max_steps", 0),
    ("model", "builtin:nope"), ("model", "not a model!"), ("dataset", "../missing.jsonl"),
    ("epsilon", 0), ("temperature", 0), ("beta", -0.1), ("name", "   "),
])
def test_invalid_values_name_their_field(field: str, value: object) -> None:
    assert field in errors_of(**{field: value})


def test_unknown_reward_and_bad_reward_params_are_rejected() -> None:
    assert "rewards" in errors_of(rewards=[{"name": "nope"}])
    assert "rewards" in errors_of(rewards=[{"name": "length_target", "params": {"target": 0}}])
    assert "rewards" in errors_of(rewards=[{"name": "length_target", "params": {"x": 1}}])
    assert "rewards" in errors_of(rewards=[])


def test_batch_must_hold_whole_groups() -> None:
    assert errors_of(num_generations=4, per_device_train_batch_size=6)
    assert RunSpec(num_generations=4, per_device_train_batch_size=8).batch_size == 8


def test_hub_ids_and_reward_params_are_coerced() -> None:
    spec = RunSpec(model="Qwen/Qwen2.5-0.5B-Instruct",
                   rewards=[{"name": "length_target", "params": {"target": "30"}}])
    assert spec.rewards[0].params == {"target": 30}


def test_unknown_fields_are_rejected() -> None:
    assert "lr" in errors_of(lr=0.1)
