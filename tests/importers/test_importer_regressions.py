"""Regressions the importer property tests found: each input gave an exception other than
LogFormatError (a 500 at the upload form) or rows no database could store."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from app.importers import LogFormatError, load_log
from app.importers.completions import load_completions


@pytest.mark.parametrize("step", [None, float("nan"), float("inf"), 2**40, -1, 1.5])
def test_completions_with_a_bad_step_are_a_format_error(tmp_path: Path, step: object) -> None:
    path = tmp_path / "completions_1.parquet"
    pd.DataFrame({"step": [step], "prompt": ["p"], "completion": ["c"],
                  "advantage": [0.0]}).to_parquet(path)
    with pytest.raises(LogFormatError, match="not a step number"):
        load_completions(path)


def test_console_tqdm_steps_beyond_the_storable_range_are_a_format_error(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("2147483648/2147483649 [00:01<00:02]\n{'loss': 0.0}\n")
    with pytest.raises(LogFormatError, match="out of range"):
        load_log(log)


@pytest.mark.parametrize("text", [
    ("{'loss': 1.0, 'epoch': 1}\n{'loss': 2.0, 'epoch': 1e999}\n"
    "{'train_runtime': 10, 'train_steps_per_second': 0.4}\n"),  # round(inf): OverflowError
    ("{'loss': 1.0, 'epoch': 1}\n{'loss': 2.0, 'epoch': 2}\n"
    "{'train_runtime': 1e308, 'train_steps_per_second': 1e308}\n"),  # total steps inf
    ("{'loss': 1.0, 'epoch': 1}\n{'loss': 2.0, 'epoch': 2}\n"
    "{'train_runtime': 10, 'train_steps_per_second': 0.4, 'epoch': 'x'}\n"),  # float('x')
])
def test_console_logs_with_odd_epochs_or_runtimes_import(tmp_path: Path, text: str) -> None:
    log = tmp_path / "console.log"
    log.write_text(text)
    assert [m["loss"] for _, m in load_log(log).rows] == [1.0, 2.0]


def test_an_infinite_step_in_json_is_a_format_error(tmp_path: Path) -> None:
    log = tmp_path / "log.json"
    log.write_text('[{"step": Infinity, "loss": 1}]')
    with pytest.raises(LogFormatError, match="has no 'step'"):
        load_log(log)
