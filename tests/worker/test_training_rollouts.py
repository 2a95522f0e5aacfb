"""Rollout capture in a real (tiny) GRPO run: the groups, rewards and advantages the trainer used."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from grpodeck.client.sender import ROLLOUTS_PER_POST
from worker.training.child import train
from worker.training.reporting import MetricsReporter
from worker.training.rollouts import build_groups, weighted_total

MAX_LEN = 16
WEIGHTS = {"length_target": 1.0, "format_tag": 0.5}
SPEC = {"model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "rewards": [{"name": "length_target", "weight": 1.0, "params": {"target": 20}},
                    {"name": "format_tag", "weight": 0.5}],
        "num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 3,
        "logging_steps": 1, "max_completion_length": MAX_LEN, "rollout_every": 1,
        "rollout_groups": 2}


def captured(receiver) -> dict[int, list[dict[str, Any]]]:
    with receiver.lock:
        items = [item for r in receiver.requests for item in r["body"].get("rollouts", [])]
    return {item["step"]: item["groups"] for item in items}


def expected_advantages(totals: list[float], scale: bool) -> list[float]:
    """TRL's sum_then_normalize formula per group (unbiased std like torch.std)."""
    mean = sum(totals) / len(totals)
    std = math.sqrt(sum((t - mean) ** 2 for t in totals) / (len(totals) - 1))
    return [(t - mean) / (std + 1e-4) if scale else t - mean for t in totals]


def check_groups(groups: list[dict[str, Any]], scale: bool) -> None:
    assert [g["index"] for g in groups] == [0, 1]
    for g in groups:
        assert g["prompt"].startswith("user: ")  # the built-in's chat prompt, rendered
        assert len(g["completions"]) == 4
        for c in g["completions"]:
            assert set(c["rewards"]) == set(WEIGHTS)
            want = sum(WEIGHTS[n] * v for n, v in c["rewards"].items())
            assert c["total"] == pytest.approx(want, abs=1e-6)
            assert 1 <= c["length"] <= MAX_LEN
            assert not c["truncated"] or c["length"] == MAX_LEN
        got = [c["advantage"] for c in g["completions"]]
        want = expected_advantages([c["total"] for c in g["completions"]], scale)
        assert got == pytest.approx(want, abs=1e-4)


def test_rollouts_carry_the_trainers_rewards_and_advantages(receiver, tmp_path: Path) -> None:
    train(SPEC, 3, receiver.url, "t", str(tmp_path))
    steps = captured(receiver)
    assert sorted(steps) == [1, 2, 3]
    metrics = {r["step"]: r["metrics"] for r in receiver.rows if "loss" in r["metrics"]}
    for step, groups in steps.items():
        check_groups(groups, scale=True)
        # Two groups of four = the whole batch: lengths/truncation agree with TRL's own metrics.
        comps = [c for g in groups for c in g["completions"]]
        assert sum(c["length"] for c in comps) / 8 == pytest.approx(
            metrics[step]["completions/mean_length"])
        assert sum(c["truncated"] for c in comps) / 8 == pytest.approx(
            metrics[step]["completions/clipped_ratio"])
    assert any(abs(c["advantage"]) > 0.1 for gs in steps.values() for g in gs
               for c in g["completions"])


def test_unscaled_advantages_and_sparse_capture(receiver, tmp_path: Path) -> None:
    train({**SPEC, "scale_rewards": "none", "rollout_every": 2}, 4, receiver.url, "t", str(tmp_path))
    steps = captured(receiver)
    assert sorted(steps) == [2]
    check_groups(steps[2], scale=False)


def test_no_capture_when_rollout_groups_is_zero(receiver, tmp_path: Path) -> None:
    train({**SPEC, "max_steps": 1, "rollout_groups": 0}, 5, receiver.url, "t", str(tmp_path))
    assert captured(receiver) == {} and receiver.rows


def test_build_groups_nan_totals_and_text_cap() -> None:
    batch = {"prompts": [[{"role": "user", "content": "hi"}]] * 2, "completions": ["x" * 30_000, ""],
             "rewards": {"a": [float("nan"), 1.0], "b": [None, float("nan")]},
             "advantages": [0.0, 0.0], "lengths": [16, 1], "truncated": [True, False]}
    (group,) = build_groups(batch, 2, 4, [1.0, 2.0])
    first, second = group["completions"]
    assert group["prompt"] == "user: hi"
    assert len(first["text"]) == 20_000
    assert first["rewards"] == {"a": None, "b": None} and first["total"] is None
    assert second["total"] == 1.0 and weighted_total([None, 2.0], [1.0, 3.0]) == 6.0
    assert build_groups(batch, 2, 0, [1.0, 2.0]) == []


def test_reporter_sends_rollouts_with_rows_and_loses_none(receiver, tmp_path: Path) -> None:
    """Captured steps are spooled like rows (``rollouts.jsonl`` next to ``metrics.jsonl``):
    every one queued before the sender starts goes out, a few per POST; a batch without any
    carries no ``rollouts`` key."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    rep = MetricsReporter(receiver.url, 9, "t", spool_path=tmp_path / "metrics.jsonl",
                          batch_rows=1, flush_seconds=3600)
    for step in range(60):  # queued before the sender starts: all of them are kept
        rep.add_rollouts(step, [{"index": 0, "prompt": "p", "completions": [{"text": "c"}]}])
    rep.add_rollouts(61, [])  # nothing captured: nothing queued
    args, state, control = TrainingArguments(str(tmp_path), report_to="none"), TrainerState(), \
        TrainerControl()
    rep.on_train_begin(args, state, control)
    wait_for(lambda: len(captured(receiver)) == 60, "every rollout step")
    assert sorted(captured(receiver)) == list(range(60))
    assert (tmp_path / "rollouts.jsonl").read_text().count("\n") == 60
    assert max(len(r["body"].get("rollouts", [])) for r in receiver.requests) == ROLLOUTS_PER_POST
    state.global_step = 1
    rep.on_log(args, state, control, logs={"loss": 1.0})
    wait_for(lambda: receiver.rows, "the row")
    assert receiver.requests[-1]["body"] == {"rows": [{"step": 1, "metrics": {"loss": 1.0}}]}
    rep.on_train_end(args, state, control)
    rep.close()


def wait_for(cond: Any, what: str) -> None:
    end = time.monotonic() + 30  # a hang guard, not a speed claim
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for: {what}"
        time.sleep(0.01)
