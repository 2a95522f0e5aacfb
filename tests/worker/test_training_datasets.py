"""Prompt datasets: deterministic built-ins, held-out eval splits, local files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpodeck.contract.spec import RunSpec
from worker.training.datasets import drop_long_prompts, load_prompts


def _prompts(ds) -> list[str]:
    return [row["prompt"][0]["content"] for row in ds]


@pytest.mark.parametrize("name", ["builtin:short-prompts", "builtin:arithmetic"])
def test_builtins_are_deterministic_per_seed(name: str) -> None:
    a, none = load_prompts(RunSpec(dataset=name, seed=1))
    b, _ = load_prompts(RunSpec(dataset=name, seed=1))
    c, _ = load_prompts(RunSpec(dataset=name, seed=2))
    assert none is None
    assert a.to_list() == b.to_list()
    assert _prompts(a) != _prompts(c)
    assert 200 <= len(a) <= 1000
    assert a[0]["prompt"][0]["role"] == "user"


def test_short_prompts_have_no_answer_and_arithmetic_answers_are_right() -> None:
    short, _ = load_prompts(RunSpec(dataset="builtin:short-prompts"))
    assert short.column_names == ["prompt"]
    arith, _ = load_prompts(RunSpec(dataset="builtin:arithmetic"))
    assert set(arith.column_names) == {"prompt", "answer"}
    for row in arith.select(range(20)):
        text = row["prompt"][0]["content"]
        a, b = text.removeprefix("What is ").split("?")[0].split(" + ")
        assert row["answer"] == str(int(a) + int(b))


def test_builtin_eval_split_is_held_out_and_deterministic() -> None:
    spec = RunSpec(dataset="builtin:arithmetic", eval_split="test", seed=3)
    train, evals = load_prompts(spec)
    train2, evals2 = load_prompts(spec)
    assert evals is not None and evals2 is not None
    assert evals.to_list() == evals2.to_list() and train.to_list() == train2.to_list()
    assert len(evals) == 32 and len(train) == 468
    full, _ = load_prompts(RunSpec(dataset="builtin:arithmetic", seed=3))
    assert _prompts(train) + _prompts(evals) == _prompts(full)


def test_builtin_rejects_unknown_eval_split() -> None:
    with pytest.raises(ValueError, match="eval splits"):
        load_prompts(RunSpec(dataset="builtin:short-prompts", eval_split="holdout"))


@pytest.fixture
def datasets_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This worker's datasets directory; ``tmp_path/outside`` holds files it must never read."""
    monkeypatch.setenv("GRPODECK_DATASETS_DIR", str(tmp_path / "datasets"))
    (tmp_path / "datasets").mkdir()
    (tmp_path / "outside").mkdir()
    yield tmp_path / "datasets"


def test_local_jsonl_text_prompts_become_chat(datasets_dir: Path) -> None:
    path = datasets_dir / "data.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Say {i}", "answer": str(i)}) + "\n"
                            for i in range(10)))
    specs = [RunSpec(dataset="data.jsonl")]
    # The spec's name allow-list refuses these at the API; the worker's own check is by the path
    # each resolves to, and all of them resolve inside this worker's directory.
    specs += [RunSpec.model_construct(**{**RunSpec().model_dump(), "dataset": ref})
              for ref in ("./data.jsonl", "x/../data.jsonl", str(path))]
    for spec in specs:
        train, evals = load_prompts(spec)
        assert evals is None and len(train) == 10
        assert train[0]["prompt"] == [{"role": "user", "content": "Say 0"}] and train[0]["answer"] == "0"
    train, evals = load_prompts(RunSpec(dataset="data.jsonl", eval_split="test"))
    assert evals is not None and len(train) + len(evals) == 10 and len(evals) == 2


def test_local_file_without_prompt_column_is_refused_without_naming_its_keys(
        datasets_dir: Path) -> None:
    (datasets_dir / "data.jsonl").write_text(json.dumps({"text": "hi", "api_key": "s3cret"}) + "\n")
    with pytest.raises(ValueError, match="'prompt'") as info:
        load_prompts(RunSpec(dataset="data.jsonl"))
    assert "api_key" not in str(info.value) and "text" not in str(info.value)
    (datasets_dir / "broken.jsonl").write_text('{"prompt": "s3cret value", oops\n')
    with pytest.raises(ValueError, match="not JSON lines") as info:
        load_prompts(RunSpec(dataset="broken.jsonl"))
    assert "s3cret" not in str(info.value)


def test_a_missing_file_inside_the_directory_is_reported_by_the_worker(datasets_dir: Path) -> None:
    with pytest.raises(ValueError, match="'gone.jsonl' not found in this worker's datasets"):
        load_prompts(RunSpec(dataset="gone.jsonl"))


def test_worker_refuses_paths_outside_its_own_directory_even_when_the_web_side_is_bypassed(
        datasets_dir: Path) -> None:
    """``model_construct`` skips the spec's validation, as a forged or differently configured web
    app would: the worker's own check must still refuse, alike for existing and missing files."""
    outside = datasets_dir.parent / "outside"
    (outside / "secret.json").write_text(json.dumps({"prompt": "the secret"}) + "\n")
    (datasets_dir / "link.json").symlink_to(outside / "secret.json")
    (datasets_dir / "dangling.json").symlink_to(outside / "nothing.json")
    refs = [str(outside / "secret.json"), str(outside / "nothing.json"), "../outside/secret.json",
            "../outside/nothing.json", "link.json", "dangling.json", "/etc/passwd", "*.json"]
    messages = set()
    for ref in refs:
        with pytest.raises(ValueError) as info:
            load_prompts(RunSpec.model_construct(**{**RunSpec().model_dump(), "dataset": ref}))
        messages.add(str(info.value))
    assert len(messages) == 1 and "datasets directory" in messages.pop()


def test_worker_directory_is_its_own_not_the_web_apps(datasets_dir: Path) -> None:
    """A file the web host has is not this worker's: the check runs on the host that reads it."""
    web_dir = datasets_dir.parent / "web-datasets"
    web_dir.mkdir()
    (web_dir / "p.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    with pytest.raises(ValueError, match="not found in this worker's datasets directory"):
        load_prompts(RunSpec(dataset="p.jsonl"))  # fine for the web app
    forged = RunSpec.model_construct(**{**RunSpec().model_dump(), "dataset": str(web_dir / "p.jsonl")})
    with pytest.raises(ValueError, match="must be inside the datasets directory"):
        load_prompts(forged)


def test_drop_long_prompts() -> None:
    from worker.training.models import load_model_and_tokenizer

    _, tok = load_model_and_tokenizer("builtin:tiny-random")
    train, _ = load_prompts(RunSpec(dataset="builtin:short-prompts"))
    assert drop_long_prompts(train, tok, None) is train
    lengths = [len(tok.apply_chat_template(r["prompt"], add_generation_prompt=True)["input_ids"])
               for r in train]
    cut = sorted(lengths)[len(lengths) // 2]
    kept = drop_long_prompts(train, tok, cut)
    assert len(kept) == sum(n <= cut for n in lengths)
    with pytest.raises(ValueError, match="no prompt fits"):
        drop_long_prompts(train, tok, 1)
