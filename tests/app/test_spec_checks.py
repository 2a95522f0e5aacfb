"""The run spec's checks, message by message: what a person sees next to the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from grpodeck.contract.spec import (
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


@pytest.fixture
def data_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Configured models and datasets directories (local references resolve inside them)."""
    from app.core import config

    for kind in ("models", "datasets"):
        (tmp_path / kind).mkdir()
        monkeypatch.setenv(f"GRPODECK_{kind.upper()}_DIR", str(tmp_path / kind))
    config.get_settings.cache_clear()
    yield tmp_path
    config.get_settings.cache_clear()


OUTSIDE = "must be inside the {kind}s directory"


def test_model_references(data_dirs: Path) -> None:
    assert model_reference(" builtin:tiny-random ") == "builtin:tiny-random"
    assert model_reference("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert model_reference(" org/model ") == "org/model"
    assert message(model_reference, "builtin:nope") == (
        "unknown built-in model; known: builtin:smollm2-135m-instruct, builtin:tiny-random")
    assert model_reference("my-model") == "my-model"  # a directory in the models directory
    for outside in ("/model", str(data_dirs / "elsewhere"), "../models-too", "a/../../x"):
        assert OUTSIDE.format(kind="model") in message(model_reference, outside), outside
    assert message(model_reference, "not a model!") == (
        "unknown model: use a built-in, a hub id like Qwen/Qwen2.5-0.5B-Instruct, "
        "or a directory (with config.json) in the models directory")
    assert "longer than any file system allows" in message(model_reference, "m" * 256)


def test_dataset_references(data_dirs: Path) -> None:
    assert dataset_reference(" builtin:arithmetic ") == "builtin:arithmetic"
    assert dataset_reference("openai/gsm8k") == "openai/gsm8k"
    assert message(dataset_reference, "builtin:nope") == (
        "unknown built-in dataset; known: builtin:short-prompts, builtin:arithmetic, "
        "builtin:humaneval, builtin:easy-python")
    for name in ("d.jsonl", "d.json"):  # whether it exists is for the worker to say
        assert dataset_reference(f" {name} ") == name
        (data_dirs / "datasets" / name).write_text("{}")
        assert dataset_reference(name) == name
    for outside in ("/etc/passwd", str(data_dirs / "d.jsonl"), "../d.jsonl"):
        assert OUTSIDE.format(kind="dataset") in message(dataset_reference, outside), outside
    assert message(dataset_reference, "nothing") == (
        "unknown dataset: use a built-in (builtin:...), a hub id like org/name, or an uploaded "
        ".jsonl file (letters, digits, '.', '_' and '-')")


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
        "constant, debug_raise, unit_tests, code_block_count, format_regex, answer_match, "
        "overlong_penalty, custom")
    spec = RunSpec(rewards=[{"name": "format_tag"}])
    assert spec.rewards[0].params == {"tag": "answer"}
