"""Real GRPO training with the tiny built-in model, reporting to a real HTTP receiver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import tiny_spec
from worker.training.child import train

ROOT = Path(__file__).resolve().parents[2]
PER_STEP_METRICS = {
    "loss", "grad_norm", "learning_rate", "num_tokens", "epoch", "step_time",
    "reward", "reward_std", "frac_reward_zero_std",
    "rewards/length_target/mean", "rewards/length_target/std",
    "completions/mean_length", "completions/min_length", "completions/max_length",
    "completions/clipped_ratio", "completions/mean_terminated_length",
    "completions/min_terminated_length", "completions/max_terminated_length",
    "kl", "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
    "clip_ratio/low_min", "clip_ratio/high_max",
}
SPEC = tiny_spec()


def test_train_reports_one_row_per_step(receiver, tmp_path: Path) -> None:
    train({**SPEC, "max_steps": 3}, 11, receiver.url, "tok-123", str(tmp_path))
    assert receiver.requests, "nothing was reported"
    assert {r["path"] for r in receiver.requests} == {"/api/runs/11/metrics"}
    assert {r["headers"]["Authorization"] for r in receiver.requests} == {"Bearer tok-123"}
    step_rows = [r for r in receiver.rows if "loss" in r["metrics"]]
    assert [r["step"] for r in step_rows] == [1, 2, 3]
    for row in step_rows:
        assert PER_STEP_METRICS <= set(row["metrics"]), PER_STEP_METRICS - set(row["metrics"])
        assert row["metrics"]["completions/max_length"] <= 16
    summary = [r for r in receiver.rows if "train_runtime" in r["metrics"]]
    assert len(summary) == 1 and summary[0]["step"] == 3
    # the local spool holds every row, exactly as sent: the record if the server was down
    spool = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in spool] == receiver.rows
    assert [r["step"] for r in receiver.rows if not system_only(r)] == [1, 2, 3, 3]


def system_only(row: dict) -> bool:  # type: ignore[type-arg]
    """A row of the system sampler (grpodeck.client.system): only ``system/*`` names."""
    return all(name.startswith("system/") for name in row["metrics"])


def test_a_training_run_reports_its_system_metrics(receiver, tmp_path: Path) -> None:
    train({**SPEC, "max_steps": 3}, 12, receiver.url, "t", str(tmp_path))
    samples = [r for r in receiver.rows if system_only(r)]
    assert samples, "no system metrics were reported"
    last = samples[-1]  # the sample taken as training ended, at the last step
    assert last["step"] == 3
    assert {"system/cpu_percent", "system/rss_bytes"} <= set(last["metrics"])
    assert last["metrics"]["system/rss_bytes"] > 50e6  # torch and the model are in memory
    assert not [k for r in samples for k in r["metrics"] if "gpu" in k]  # CPU torch here
    # tokens/s rides in the step's own row, from the num_tokens TRL logs, from the 2nd log on
    rates = {r["step"]: r["metrics"]["system/tokens_per_s"] for r in receiver.rows
             if "system/tokens_per_s" in r["metrics"]}
    assert sorted(rates) == [2, 3] and all(v > 0 for v in rates.values())


def test_stop_answer_ends_training_early(receiver, tmp_path: Path) -> None:
    receiver.stop = True
    train({**SPEC, "max_steps": 50}, 1, receiver.url, "t", str(tmp_path), batch_rows=1)
    steps = [r["step"] for r in receiver.rows if "loss" in r["metrics"]]
    # The answer arrives on the sender thread; the next on_step_end/on_log obeys it.
    assert steps[:1] == [1] and len(steps) < 5, steps


def test_eval_split_reports_eval_rows(receiver, tmp_path: Path) -> None:
    spec = {**SPEC, "dataset": "builtin:arithmetic", "max_steps": 2, "eval_split": "test",
            "eval_steps": 2, "max_completion_length": 4,
            "rewards": [{"name": "exact_answer"}, {"name": "length_target", "weight": 0.1}]}
    train(spec, 2, receiver.url, "t", str(tmp_path))
    evals = [r for r in receiver.rows if any(k.startswith("eval_") for k in r["metrics"])]
    assert [r["step"] for r in evals] == [2]
    assert {"eval_reward", "eval_rewards/exact_answer/mean", "eval_loss"} <= set(evals[0]["metrics"])
    assert all(k.startswith("eval_") for k in evals[0]["metrics"])


def test_child_exits_nonzero_with_traceback_when_a_reward_fails(receiver, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**SPEC, "max_steps": 3, "rewards": [{"name": "debug_raise"}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "worker.training.child", "--spec", str(spec), "--run-id", "5",
         "--report-url", receiver.url, "--output-dir", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "GRPODECK_RUN_TOKEN": "t"},
    )
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
    assert "debug_raise: reward function failed on call 1" in proc.stderr


def test_child_exits_zero_on_success(receiver, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**SPEC, "max_steps": 1}))
    proc = subprocess.run(
        [sys.executable, "-m", "worker.training.child", "--spec", str(spec), "--run-id", "6",
         "--report-url", receiver.url, "--output-dir", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "GRPODECK_RUN_TOKEN": "t"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["step"] for r in receiver.rows if "loss" in r["metrics"]] == [1]
    # The token came from the environment: it is not on the command line.
    assert {r["headers"]["Authorization"] for r in receiver.requests} == {"Bearer t"}


def test_advanced_settings_train(receiver, tmp_path: Path) -> None:
    """The Advanced section's settings drive a real run: warmup ramps the learning rate,
    checkpoints are written every save_steps, and nothing in TRL refuses the combination."""
    advanced = {"epsilon_high": 0.28, "loss_type": "dr_grpo", "num_iterations": 2, "top_p": 0.9,
                "top_k": 20, "mask_truncated_completions": True,
                "gradient_accumulation_steps": 2, "max_grad_norm": 0.5, "warmup_ratio": 0.5,
                "lr_scheduler_type": "cosine", "save_steps": 2}
    train({**SPEC, "max_steps": 4, **advanced}, 12, receiver.url, "tok", str(tmp_path))
    rates = [r["metrics"]["learning_rate"] for r in receiver.rows if "loss" in r["metrics"]]
    assert len(rates) == 4 and rates[0] < rates[1] < rates[2] == max(rates)  # warmup, then cosine
    assert sorted(p.name for p in tmp_path.rglob("checkpoint-*")) == ["checkpoint-2",
                                                                       "checkpoint-4"]
