"""TRL ``completions_<step>.parquet`` files imported as rollout groups."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from app.importers import LogFormatError
from app.importers.completions import load_completions


def chat(text: str, role: str = "user") -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": role, "content": text}]


def write_step(folder: Path, step: int, prompts: list, completions: list, **cols) -> Path:
    """A table laid out like GRPOTrainer.log writes it (step, prompt, completion, rewards...,
    extras..., advantage)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = len(prompts)
    table = {"step": [step] * n, "prompt": prompts, "completion": completions, **cols}
    path = folder / f"completions_{step:05d}.parquet"
    pd.DataFrame(table).to_parquet(path)
    return path


def two_groups(folder: Path, step: int) -> Path:
    prompts = [chat("Say hi")] * 2 + [chat("Say bye")] * 2
    completions = [[{"role": "assistant", "content": t}] for t in ("hi", "hello", "bye", "")]
    return write_step(folder, step, prompts, completions,
                      accuracy=[1.0, 0.0, None, None], format=[0.5, 0.5, None, 1.0],
                      note=["a", "b", "c", "d"], advantage=[0.7, -0.7, 0.0, 0.0])


def test_conversational_table_becomes_groups(tmp_path: Path) -> None:
    path = two_groups(tmp_path / "completions", 5)
    (step,) = load_completions(path)
    assert step["step"] == 5 and [g["index"] for g in step["groups"]] == [0, 1]
    first, second = step["groups"]
    assert first["prompt"] == "system: Be brief.\nuser: Say hi"
    assert [c["text"] for c in first["completions"]] == ["hi", "hello"]
    c0 = first["completions"][0]
    assert c0 == {"text": "hi", "rewards": {"accuracy": 1.0, "format": 0.5}, "total": 1.5,
                  "advantage": 0.7, "length": None, "truncated": None}  # "note" is not a reward
    assert second["completions"][0]["rewards"] == {"accuracy": None, "format": None}
    assert second["completions"][0]["total"] is None  # nothing scored it
    assert second["completions"][1]["total"] == 1.0 and second["completions"][1]["text"] == ""


def test_directory_of_steps_and_run_dir(tmp_path: Path) -> None:
    two_groups(tmp_path / "completions", 10)
    two_groups(tmp_path / "completions", 2)
    steps = load_completions(tmp_path)  # a run dir containing completions/
    assert [s["step"] for s in steps] == [2, 10]
    assert load_completions(tmp_path / "completions") == steps


def test_text_prompts_and_num_generations_split(tmp_path: Path) -> None:
    path = write_step(tmp_path, 1, ["same"] * 4, ["a", "b", "c", "d"],
                      r=[1, 2, 3, 4], advantage=[-1.0, 1.0, -1.0, 1.0])
    (step,) = load_completions(path)
    assert len(step["groups"]) == 1 and step["groups"][0]["prompt"] == "same"
    (step,) = load_completions(path, num_generations=2)
    assert [len(g["completions"]) for g in step["groups"]] == [2, 2]
    assert [g["index"] for g in step["groups"]] == [0, 1]


def test_step_from_file_name_when_column_missing(tmp_path: Path) -> None:
    path = tmp_path / "completions_00007.parquet"
    pd.DataFrame({"prompt": ["p", "p"], "completion": ["x", "y"], "r": [0.0, 1.0],
                  "advantage": [-0.7, 0.7]}).to_parquet(path)
    assert load_completions(path)[0]["step"] == 7


@pytest.mark.parametrize("setup, reason", [
    (lambda p: p.write_bytes(b"not parquet at all"), "not a readable parquet file"),
    (lambda p: pd.DataFrame({"step": [1], "x": [1.0]}).to_parquet(p), "not a TRL completions table"),
])
def test_unreadable_files_raise_with_a_reason(tmp_path: Path, setup, reason: str) -> None:
    path = tmp_path / "completions_00001.parquet"
    setup(path)
    with pytest.raises(LogFormatError, match=reason):
        load_completions(path)


def test_missing_or_empty_locations(tmp_path: Path) -> None:
    with pytest.raises(LogFormatError, match="file not found"):
        load_completions(tmp_path / "nope")
    with pytest.raises(LogFormatError, match="no completions_"):
        load_completions(tmp_path)
