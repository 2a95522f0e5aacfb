"""The run spec's checks, message by message: what a person sees next to the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.runs.spec import (
    RunSpec,
    check_batch,
    dataset_reference,
    model_reference,
    reward_params,
    run_name,
)


def message(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as err:
        fn(*args)
    return str(err.value)


def test_run_name_is_stripped_and_required() -> None:
    assert run_name("  my run ") == "my run"
    assert message(run_name, " \t ") == "the run needs a name"
    assert RunSpec(name=" x ").name == "x"


def test_model_references(tmp_path: Path) -> None:
    assert model_reference(" builtin:tiny-random ") == "builtin:tiny-random"
    assert model_reference("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert model_reference(" org/model ") == "org/model"
    assert message(model_reference, "builtin:nope") == (
        "unknown built-in model; known: builtin:smollm2-135m-instruct, builtin:tiny-random")
    (tmp_path / "config.json").write_text("{}")
    assert model_reference(str(tmp_path)) == str(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert message(model_reference, str(empty)) == "local model directory has no config.json"
    assert message(model_reference, "not a model!") == (
        "unknown model: use a built-in, a hub id like Qwen/Qwen2.5-0.5B-Instruct, "
        "or a local directory with config.json")
    for bad in ("not a model!", "org/", "/model", "-org/model", "a/b/c"):
        assert message(model_reference, bad).startswith("unknown model: use a built-in, a hub id")


def test_dataset_references(tmp_path: Path) -> None:
    assert dataset_reference(" builtin:arithmetic ") == "builtin:arithmetic"
    assert dataset_reference("openai/gsm8k") == "openai/gsm8k"
    assert message(dataset_reference, "builtin:nope") == (
        "unknown built-in dataset; known: builtin:short-prompts, builtin:arithmetic")
    for name in ("d.jsonl", "d.json"):
        path = tmp_path / name
        assert message(dataset_reference, str(path)) == "dataset file not found"
        path.write_text("{}")
        assert dataset_reference(f" {path} ") == str(path)
    assert message(dataset_reference, "nothing") == (
        "unknown dataset: use a built-in, a hub id, or a .jsonl file")
    assert message(dataset_reference, str(tmp_path)) == (
        "unknown dataset: use a built-in, a hub id, or a .jsonl file")


def test_batch_rules() -> None:
    check_batch(None, 4, None, None)
    check_batch(8, 4, None, None)
    check_batch(4, 4, 10, "test")
    assert message(check_batch, 6, 4, None, None) == (
        "per_device_train_batch_size must be a multiple of num_generations "
        "(each step scores whole groups)")
    assert message(check_batch, 2, 4, None, None).startswith("per_device_train_batch_size")
    assert message(check_batch, None, 4, 10, None) == "eval_steps needs an eval_split"
    assert message(check_batch, None, 4, 10, "") == "eval_steps needs an eval_split"
    check_batch(None, 4, 0, None)  # no eval steps: nothing to check
    with pytest.raises(ValidationError, match="eval_steps needs an eval_split"):
        RunSpec(eval_steps=5)


def test_reward_params() -> None:
    assert reward_params("length_target", {"target": "9"}) == {"target": 9}
    assert reward_params("exact_answer", {}) == {}
    assert message(reward_params, "nope", {}) == (
        "unknown reward function 'nope'; known: length_target, format_tag, exact_answer, "
        "constant, debug_raise")
    spec = RunSpec(rewards=[{"name": "format_tag"}])
    assert spec.rewards[0].params == {"tag": "answer"}
