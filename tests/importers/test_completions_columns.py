"""Completions tables: which columns are rewards, where the step comes from, and errors that
name the file and say what is missing."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from app.importers import LogFormatError
from app.importers.completions import _is_numeric, _num, load_completions


def table(path: Path, **cols) -> Path:
    pd.DataFrame(cols).to_parquet(path)
    return path


def error(path: Path) -> LogFormatError:
    with pytest.raises(LogFormatError) as err:
        load_completions(path)
    return err.value


def only_completion(path: Path) -> dict:
    (step,) = load_completions(path)
    (group,) = step["groups"]
    return group["completions"][0]


def test_a_step_column_wins_over_the_file_name(tmp_path: Path) -> None:
    path = table(tmp_path / "completions_00007.parquet", step=[3], prompt=["p"],
                 completion=["c"], advantage=[0.0])
    assert load_completions(path)[0]["step"] == 3


def test_reward_columns(tmp_path: Path) -> None:
    path = table(tmp_path / "completions_00001.parquet", prompt=["p"], completion=["c"],
                 advantage=[0.5], ints=[2], abstained=[None],
                 flags=pd.Series([True], dtype=object), text=["t"])
    c = only_completion(path)
    assert c["rewards"] == {"ints": 2.0, "abstained": None}
    assert c["total"] == 2.0 and c["advantage"] == 0.5


def test_a_boolean_column_with_nulls_is_not_a_reward(tmp_path: Path) -> None:
    path = table(tmp_path / "completions_00001.parquet", prompt=["p", "p"],
                 completion=["a", "b"], advantage=[0.0, 0.0], r=[1.0, 0.0],
                 ok=pd.Series([True, None], dtype=object))
    assert set(only_completion(path)["rewards"]) == {"r"}


def test_numeric_prompts_and_completions_stay_text(tmp_path: Path) -> None:
    path = table(tmp_path / "completions_00001.parquet", prompt=[12], completion=[34],
                 advantage=[0.0], r=[1.0])
    (step,) = load_completions(path)
    assert step["groups"][0]["prompt"] == "12"
    c = step["groups"][0]["completions"][0]
    assert c["text"] == "34" and c["rewards"] == {"r": 1.0}


def test_is_numeric_and_num() -> None:
    assert _is_numeric(pd.Series([0.5, None, math.nan, 3], dtype=object))
    assert not _is_numeric(pd.Series([0.5, "x"], dtype=object))
    assert not _is_numeric(pd.Series([True, False], dtype=object))
    assert _is_numeric(pd.Series([1, 2])) and _is_numeric(pd.Series([1.5, math.nan]))
    assert _num(2) == 2.0 and _num(math.inf) == math.inf
    assert _num(math.nan) is None and _num(None) is None and _num(True) is None
    assert _num("1.5") is None


@pytest.mark.parametrize("cols,why", [
    ({"step": [1], "x": [1.0]}, ("not a TRL completions table: no prompt, completion, "
                                "advantage column")),
    ({"prompt": ["p"], "completion": ["c"]}, "not a TRL completions table: no advantage column"),
])
def test_missing_columns_are_named(tmp_path: Path, cols: dict, why: str) -> None:
    path = table(tmp_path / "completions_00001.parquet", **cols)
    err = error(path)
    assert (err.path, err.reason) == (str(path), why)


def test_no_step_anywhere(tmp_path: Path) -> None:
    path = table(tmp_path / "rollouts.parquet", prompt=["p"], completion=["c"], advantage=[0.0])
    err = error(path)
    assert (err.path, err.reason) == (str(path), "no 'step' column and no step in the file name")


def test_unreadable_and_missing_paths_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "completions_00001.parquet"
    bad.write_bytes(b"nope")
    err = error(bad)
    assert err.path == str(bad) and err.reason.startswith("not a readable parquet file (")
    missing = tmp_path / "nowhere"
    err = error(missing)
    assert (err.path, err.reason) == (str(missing), "file not found")
    empty = tmp_path / "empty"
    empty.mkdir()
    err = error(empty)
    assert (err.path, err.reason) == (str(empty), "no completions_<step>.parquet files found")
