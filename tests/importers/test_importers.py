"""Importers: each format written by the test itself (shapes mimic real TRL output)."""

from __future__ import annotations

import json
import math

import pytest

from app.importers import LogFormatError, load_log


def trainer_state(tmp_path, final_summary=True):
    hist = []
    for s in (10, 20, 30):
        hist.append({"completion_length": 500.0 - s, "epoch": s / 1000, "kl": 0.001 * s,
                     "loss": 0.0, "reward": 0.5 + s / 100, "rewards/correctness_reward_func": 0.3,
                     "learning_rate": 1e-6, "grad_norm": 0.2, "step": s})
    hist.append({"eval_reward": 0.7, "eval_loss": 0.01, "eval_runtime": 3.0, "epoch": 0.02,
                 "step": 20})
    if final_summary:
        hist.append({"train_runtime": 100.0, "train_steps_per_second": 0.3, "train_loss": 0.0,
                     "total_flos": 0.0, "epoch": 0.03, "step": 30})
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"global_step": 30, "max_steps": 30, "logging_steps": 10,
                             "log_history": hist}))
    return p


def test_trainer_state(tmp_path):
    log = load_log(trainer_state(tmp_path))
    assert log.source_format == "trainer_state"
    assert [s for s, _ in log.rows] == [10, 20, 30]
    row20 = dict(log.rows)[20]
    assert row20["eval_reward"] == 0.7 and row20["reward"] == 0.7  # merged train + eval
    assert row20["completions/mean_length"] == 480.0
    assert "rewards/correctness_reward_func/mean" in row20
    assert "train_runtime" not in dict(log.rows)[30] and "step" not in row20
    assert log.meta["max_steps"] == 30 and log.meta["logging_steps"] == 10


def test_trainer_state_checkpoint_without_summary(tmp_path):
    assert len(load_log(trainer_state(tmp_path, final_summary=False)).rows) == 3


def test_json_list_sorted_and_strings(tmp_path):
    p = tmp_path / "metrics.json"
    p.write_text(json.dumps([{"step": 2, "reward": "0.5", "kl": "nan"},
                             {"step": 1, "reward": 0.25, "note": "x"}]))
    log = load_log(p)
    assert log.source_format == "json_list"
    assert [s for s, _ in log.rows] == [1, 2]
    assert log.rows[1][1]["reward"] == 0.5 and math.isnan(log.rows[1][1]["kl"])
    assert "note" not in log.rows[0][1]


def test_jsonl_with_torn_last_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "reward": 0.1}\n\n{"step": 2, "reward": 0.2, '
                 '"completions/mean_length": 12}\n{"step": 3, "rew')
    log = load_log(p)
    assert log.source_format == "jsonl" and [s for s, _ in log.rows] == [1, 2]


def test_jsonl_bad_middle_line(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1, "reward": 0.1}\nnot json\n{"step": 3, "reward": 0.3}\n')
    with pytest.raises(LogFormatError, match="line 2"):
        load_log(p)


def _console_dict(i, with_strings=False):
    d = {"loss": 0.0, "grad_norm": 0.1, "learning_rate": 1e-5,
         "completions/mean_length": 270.0 + i, "rewards/reward_fn/mean": 0.9,
         "reward": 0.9, "frac_reward_zero_std": 0.8, "entropy": 0.1, "epoch": 0.01}
    if with_strings:
        d["reward"] = "0.9"
    return repr(d)


def test_console_log_interval_from_summary(tmp_path):
    lines = ["INFO starting", "Updated tokens: {'bos_token_id': None, 'pad_token_id': 1}"]
    lines += [_console_dict(i, with_strings=i == 2) for i in range(4)]
    lines += [("{'train_runtime': 80.0, 'train_samples_per_second': 2.0, "
              "'train_steps_per_second': 0.25, 'train_loss': 0.004, 'epoch': 0.05}"), "bye"]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines))
    log = load_log(p)
    assert log.source_format == "console"
    assert [s for s, _ in log.rows] == [5, 10, 15, 20]  # 20 total steps / 4 rows
    assert log.meta["step_inference"] == "interval" and log.rows[2][1]["reward"] == 0.9


def test_console_log_steps_from_tqdm(tmp_path):
    text = ""
    for i in range(3):
        bar = "".join(f"{s}/30 [00:0{i}<00:10, 1.0it/s]\r" for s in range(i * 10 + 1, i * 10 + 11))
        text += bar + "\n" + _console_dict(i) + "\n"
    p = tmp_path / "console.txt"
    p.write_text(text)
    log = load_log(p)
    assert [s for s, _ in log.rows] == [10, 20, 30] and log.meta["step_inference"] == "tqdm"


def test_console_log_without_any_hint_uses_logging_steps(tmp_path):
    p = tmp_path / "c.log"
    p.write_text("\n".join(_console_dict(i) for i in range(3)))
    assert [s for s, _ in load_log(p).rows] == [1, 2, 3]
    assert [s for s, _ in load_log(p, logging_steps=10).rows] == [10, 20, 30]


@pytest.mark.parametrize("content,reason", [
    ("", "empty"), ("hello world\nno metrics here\n", "unrecognised"),
    ('{"foo": 1}', "neither"), ('[{"reward": 1.0}]', "no 'step'"),
    ('{"log_history": [{"reward": 1.0}]}', "no 'step'"),
])
def test_errors(tmp_path, content, reason):
    p = tmp_path / "bad.txt"
    p.write_text(content)
    with pytest.raises(LogFormatError, match=reason) as e:
        load_log(p)
    assert e.value.reason


def test_missing_binary_and_directory(tmp_path):
    with pytest.raises(LogFormatError, match="not found"):
        load_log(tmp_path / "nope.json")
    b = tmp_path / "x.bin"
    b.write_bytes(b"\x00\x01\x02" * 10)
    with pytest.raises(LogFormatError, match="binary"):
        load_log(b)
    with pytest.raises(LogFormatError, match="folder holds no trainer_state.json"):
        load_log(tmp_path)


def test_diagnose_file_end_to_end(tmp_path):
    from app.imports.service import diagnose_path as diagnose_file
    d = diagnose_file(trainer_state(tmp_path))
    assert d.verdict == "healthy"
