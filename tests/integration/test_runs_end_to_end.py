"""The whole path on a real stack: HTTP form -> run record -> Celery queue -> worker process ->
TRL GRPOTrainer on builtin:tiny-random -> metric ingest over HTTP -> stored series."""

from __future__ import annotations

import httpx
import psutil

from tests.conftest import TINY
from tests.stack import Stack

# What TRL's GRPOTrainer logs every step for one reward function on a policy without eval.
PER_STEP = {"reward", "reward_std", "frac_reward_zero_std", "rewards/length_target/mean",
            "completions/mean_length", "loss", "grad_norm", "learning_rate"}


def test_form_launch_trains_and_stores_one_value_per_logged_step(stack: Stack) -> None:
    form = {"name": "it-form", "model": TINY["model"], "dataset": TINY["dataset"],
            "reward_0_name": "length_target", "reward_0_weight": "1", "reward_0_params": "target=20",
            "num_generations": "4", "max_steps": "4", "max_completion_length": "16",
            "logging_steps": "1", "beta": "0.04"}
    page = httpx.post(f"{stack.url}/runs/new", data=form, follow_redirects=False, timeout=30)
    assert page.status_code == 303, page.text
    run_id = int(page.headers["location"].rsplit("/", 1)[1])
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    assert run["step"] == 4 and run["started_at"] and run["finished_at"]
    series = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", timeout=10).json()
    assert PER_STEP <= set(series), sorted(series)
    for name in PER_STEP | {"kl"}:
        assert series[name]["steps"] == [1, 2, 3, 4], (name, series[name])
    page = httpx.get(f"{stack.url}/runs/{run_id}", timeout=10).text
    assert 'id="chart-reward"' in page and 'id="chart-kl"' in page
    rollouts = httpx.get(f"{stack.url}/api/runs/{run_id}/rollouts", params={"step": 4}).json()
    assert rollouts["steps"] == [1, 2, 3, 4]
    group = rollouts["groups"][0]["completions"]
    assert len(group) == 4 and all(c["length"] <= 16 for c in group)
    totals = [c["total"] for c in group]
    mean = sum(totals) / 4
    std = (sum((t - mean) ** 2 for t in totals) / 3) ** 0.5
    for c in group:  # the stored advantage is the trainer's (r - mean) / (std + 1e-4)
        assert abs(c["advantage"] - (c["total"] - mean) / (std + 1e-4)) < 1e-3


def test_a_reward_that_raises_fails_the_run_with_the_error(stack: Stack) -> None:
    run_id = stack.launch(name="it-fail", max_steps=3, **TINY,
                          rewards=[{"name": "debug_raise", "params": {"after_calls": 1}}])
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "failed"
    assert "RuntimeError" in run["error"] and "debug_raise" in run["error"]
    assert "Traceback" in run["traceback_tail"]
    page = httpx.get(f"{stack.url}/runs/{run_id}", timeout=10).text
    assert "debug_raise: reward function failed" in page


def test_cancel_stops_a_running_run(stack: Stack) -> None:
    run_id = stack.launch(name="it-cancel", max_steps=10_000, **TINY,
                          rewards=[{"name": "length_target"}])
    stack.wait_for(run_id, {"running"})
    stack.wait_until(lambda: stack.run(run_id)["step"] >= 2, "two steps trained")
    reply = httpx.post(f"{stack.url}/api/runs/{run_id}/cancel", timeout=10)
    assert reply.status_code == 200 and reply.json()["cancel_requested"]
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"}, timeout=120)
    assert run["status"] == "cancelled" and run["step"] < 10_000


def test_cancel_while_queued_never_trains(stack: Stack) -> None:
    blocker = stack.launch(name="it-blocker", max_steps=10_000, **TINY,
                           rewards=[{"name": "length_target"}])
    queued = stack.launch(name="it-queued", max_steps=3, **TINY,
                          rewards=[{"name": "length_target"}])
    assert stack.run(queued)["status"] == "queued"
    assert httpx.post(f"{stack.url}/api/runs/{queued}/cancel", timeout=10).status_code == 200
    httpx.post(f"{stack.url}/api/runs/{blocker}/cancel", timeout=10)
    stack.wait_for(blocker, {"cancelled", "failed", "succeeded"}, timeout=120)
    run = stack.wait_for(queued, {"cancelled"})
    assert run["started_at"] is None and run["step"] == 0


def test_a_constant_reward_is_diagnosed_as_zero_spread(stack: Stack) -> None:
    run_id = stack.launch(name="it-constant", max_steps=24, **TINY,
                          rewards=[{"name": "constant", "params": {"value": 0.0}}])
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    body = httpx.get(f"{stack.url}/api/runs/{run_id}/findings", timeout=10).json()
    categories = {f["category"] for f in body["findings"]}
    assert categories & {"zero_reward_spread", "stalled"}, body
    assert "dead_reward_component" in categories
    assert body["verdict"] in ("warning", "critical")


def test_cli_launches_a_spec_file(stack: Stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json
    import subprocess
    import sys

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "it-cli", "max_steps": 2, **TINY,
                                "rewards": [{"name": "length_target", "params": {"target": 20}}]}))
    out = subprocess.run([sys.executable, "-m", "app.cli", "launch", str(spec), "--url", stack.url],
                         capture_output=True, text=True, check=True).stdout
    run_id = int(out.split()[1])
    assert stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})["status"] == "succeeded"
    spec.write_text(json.dumps({"name": "bad", "num_generations": 1}))
    bad = subprocess.run([sys.executable, "-m", "app.cli", "launch", str(spec), "--url", stack.url],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1 and "num_generations" in bad.stderr


def test_a_pool_process_imports_the_training_stack_once_and_forks_later_runs_warm(
        stack: Stack) -> None:
    """Two runs in a row on the stack's one pool process: the training stack was imported once
    (by this test's first run or an earlier test's) and the second run's child is forked from
    that process (``worker.training.warm``), showing the command line a fresh start runs."""
    pool = stack.named["worker"]
    first = stack.launch(name="warm-1", max_steps=1, **TINY, rewards=[{"name": "length_target"}])
    assert stack.wait_for(first, {"succeeded", "failed", "cancelled"})["status"] == "succeeded"
    second = stack.launch(name="warm-2", max_steps=200, **TINY,
                          rewards=[{"name": "length_target"}])
    stack.wait_until(lambda: stack.training_child(second) is not None, "the second run's child")
    child = stack.training_child(second)
    assert child is not None
    pool_processes = {p.pid for p in psutil.Process(pool.pid).children()}
    assert child.ppid() in pool_processes  # forked by the pool process, not a launcher
    assert child.cmdline()[1:3] == ["-m", "worker.training.child"]
    httpx.post(f"{stack.url}/api/runs/{second}/cancel", timeout=10)
    assert stack.wait_for(second, {"succeeded", "failed", "cancelled"})["status"] == "cancelled"
    imported = stack.log("worker").count("training stack imported in")
    assert imported == 1, stack.log("worker")
