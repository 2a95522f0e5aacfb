"""Prompt datasets: deterministic built-ins, held-out eval splits, local files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.runs.spec import RunSpec
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


def test_local_jsonl_text_prompts_become_chat(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Say {i}", "answer": str(i)}) + "\n"
                            for i in range(10)))
    train, evals = load_prompts(RunSpec(dataset=str(path)))
    assert evals is None and len(train) == 10
    assert train[0]["prompt"] == [{"role": "user", "content": "Say 0"}] and train[0]["answer"] == "0"
    train, evals = load_prompts(RunSpec(dataset=str(path), eval_split="test"))
    assert evals is not None and len(train) + len(evals) == 10 and len(evals) == 2


def test_local_file_without_prompt_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"text": "hi"}) + "\n")
    with pytest.raises(ValueError, match="'prompt'"):
        load_prompts(RunSpec(dataset=str(path)))


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
