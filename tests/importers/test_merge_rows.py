"""Row merging and step reading shared by every log importer: one dict per step, sorted, the
later value winning when a step is logged again, summary rows and step keys left out."""

from __future__ import annotations

import json

import pytest

from app.importers import LogFormatError, load_log
from app.importers.base import is_summary_row, merge_rows, step_of, step_pairs


def test_a_relogged_value_at_the_same_step_wins() -> None:
    rows = merge_rows([(10, {"reward": 0.1, "kl": 0.2}), (5, {"reward": 0.05}),
                       (10, {"reward": 0.9})])
    assert rows == [(5, {"reward": 0.05}), (10, {"reward": 0.9, "kl": 0.2})]


@pytest.mark.parametrize("name,content", [
    ("metrics.jsonl", '{"step": 3, "reward": 0.1}\n{"step": 3, "reward": 0.7}\n'),
    ("metrics.json", json.dumps([{"step": 3, "reward": 0.1}, {"step": 3, "reward": 0.7}])),
    ("trainer_state.json", json.dumps({"log_history": [{"step": 3, "reward": 0.1},
                                                       {"step": 3, "reward": 0.7}]})),
])
def test_the_later_value_wins_in_every_format(tmp_path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    assert load_log(path).rows == [(3, {"reward": 0.7})]


def test_step_keys_and_summary_keys_stay_out_and_empty_steps_are_dropped() -> None:
    rows = merge_rows([(1, {"step": 1, "global_step": 1, "train_loss": 0.3, "total_flos": 9.0,
                            "train_runtime": 1.0, "train_samples_per_second": 2.0,
                            "train_steps_per_second": 3.0}),
                       (2, {"global_step": 2, "loss": 0.5})])
    assert rows == [(2, {"loss": 0.5})]


def test_names_are_normalised_while_merging() -> None:
    (row,) = merge_rows([("4", {"completion_length": 12.0, "reward": "0.5", "note": "text"})])
    assert row == (4, {"completions/mean_length": 12.0, "reward": 0.5})


def test_summary_rows_are_recognised_by_train_runtime() -> None:
    assert is_summary_row({"train_runtime": 1.0, "step": 3})
    assert not is_summary_row({"train_loss": 1.0, "step": 3})


@pytest.mark.parametrize("row,step", [
    ({"step": 7}, 7), ({"global_step": 8}, 8), ({"step": 7.9}, 7), ({"step": "12"}, 12),
    ({"step": " 12 "}, 12), ({"step": "-3"}, -3), ({"step": True, "global_step": 4}, 4),
    ({"step": False}, None), ({"step": "x"}, None), ({"step": "1.5"}, None), ({}, None),
    ({"step": None, "global_step": 6}, 6), ({"step": 2, "global_step": 9}, 2),
    ({"step": float("nan")}, None), ({"step": float("inf")}, None),
    ({"step": "X5", "global_step": 3}, 3),  # text that is not a number: try the next key
])
def test_step_of(row: dict, step: int | None) -> None:
    assert step_of(row) == step


def test_step_pairs_skips_summaries_and_non_dicts_and_names_the_entry_without_a_step() -> None:
    entries = [("line 1", {"step": 1, "reward": 0.1}), ("line 2", [1, 2]),
               ("line 3", {"train_runtime": 5.0}), ("line 4", {"step": 2})]
    assert step_pairs(entries, "f.jsonl") == [(1, {"step": 1, "reward": 0.1}), (2, {"step": 2})]
    with pytest.raises(LogFormatError) as err:
        step_pairs([("line 1", {"step": 1}), ("line 9", {"reward": 0.2})], "f.jsonl")
    assert err.value.reason == "line 9 has no 'step'" and err.value.path == "f.jsonl"
    assert str(err.value) == "f.jsonl: line 9 has no 'step'"


def test_an_infinite_step_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "reward": 0.1}\n{"step": Infinity, "reward": 0.2}\n')
    with pytest.raises(LogFormatError, match="line 2 has no 'step'"):
        load_log(path)
