"""One run on two processes through the real stack (issue 26): the worker starts the training
under ``accelerate launch`` (torchrun; two CPU ranks over gloo), only rank 0 reports, and every
way a run ends ends every rank: success, cancel, a rank that raises, and kill -9 of the worker.

A Redis-backed stack with the scheduler (the lost-run check), so the web app also sees the
worker's device report. Tiny model, few steps: two ranks share two loaded cores.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from bs4 import BeautifulSoup

from grpodeck.contract.log_markers import rank_failed_line
from tests.integration.conftest import live_stack
from tests.stack import TERMINAL, Stack

ENV = {"GRPODECK_LOST_AFTER_SECONDS": "60", "GRPODECK_LOST_CHECK_SECONDS": "1",
       "GRPODECK_CANCEL_GRACE_SECONDS": "30"}
TINY = {"model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "num_generations": 4, "max_completion_length": 8, "logging_steps": 1,
        "rewards": [{"name": "length_target", "params": {"target": 20}}]}


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with live_stack("postgres-redis", tmp_path_factory.mktemp("multi-device"), ENV,
                    scheduler=True) as live:
        yield live


def up(stack: Stack) -> Stack:
    if stack.named["worker"].poll() is not None:
        stack.start_worker()
    return stack


def run_processes(stack: Stack, run_id: int) -> list[psutil.Process]:
    """The launcher and every rank of the run: each has the run's spec file on its command
    line (the ranks run in sessions of their own, so no process group holds them all)."""
    spec = str(stack.workdir / "runs" / str(run_id) / "spec.json")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if spec in (proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def ranks_of(stack: Stack, run_id: int, timeout: float = 240) -> dict[int, psutil.Process]:
    """The run's two rank processes by RANK, once both are up."""
    deadline = time.monotonic() + timeout
    while True:
        ranks = {}
        for proc in run_processes(stack, run_id):
            try:
                if "RANK" in (env := proc.environ()):
                    ranks[int(env["RANK"])] = proc
            except psutil.NoSuchProcess:
                continue
        if len(ranks) == 2:
            return ranks
        assert time.monotonic() < deadline, f"no two ranks for run {run_id}\n{stack.log('worker')}"
        time.sleep(0.3)


def none_left(stack: Stack, run_id: int, timeout: float = 60) -> None:
    stack.wait_until(lambda: not run_processes(stack, run_id), "every rank to exit", timeout)


def spooled_train_steps(stack: Stack, run_id: int) -> list[int]:
    """The steps of the training rows in the run's spool (one row per logged step)."""
    path = stack.workdir / "runs" / str(run_id) / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row["step"] for row in rows if "loss" in row.get("metrics", {})]


def steps_of(stack: Stack, run_id: int, name: str = "loss") -> list[int]:
    series = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", params={"names": name},
                       timeout=30).json()
    return series.get(name, {}).get("steps", [])


def log_text(stack: Stack, run_id: int) -> str:
    return httpx.get(f"{stack.url}/runs/{run_id}/logs.txt", timeout=30).text


def rank_rows(page: str) -> dict[str, list[str]]:
    """The run page's per-rank table: rank -> [latest step done, state]."""
    table = BeautifulSoup(page, "html.parser").select_one("#devices-panel #rank-table")
    assert table is not None, page[-3000:]
    return {tr.th.get_text(): [td.get_text().strip() for td in tr.select("td")]
            for tr in table.select("tbody tr")}


def assert_reported_once(stack: Stack, run_id: int, n: int) -> None:
    """Every step arrived once, from rank 0 alone (a second reporting rank would add rows to
    the spool and a second end-of-training summary)."""
    assert steps_of(stack, run_id) == list(range(1, n + 1))
    assert spooled_train_steps(stack, run_id) == list(range(1, n + 1))
    spool = (stack.workdir / "runs" / str(run_id) / "metrics.jsonl").read_text()
    assert spool.count("train_runtime") == 1
    logs = log_text(stack, run_id)
    assert logs.count("[grpodeck] stage: first_step") <= 1
    for rank in (0, 1):  # each rank says how far it got: the run's per-rank status
        assert f"rank {rank}/2: step {n} done" in logs, logs[-3000:]


def test_api_launch_on_two_processes_reports_every_step_once(multi: Stack) -> None:
    stack, n = up(multi), 3
    run_id = stack.launch(name="two-ranks-api", max_steps=n, num_processes=2, **TINY)
    ranks = ranks_of(stack, run_id)
    assert {int(p.environ()["WORLD_SIZE"]) for p in ranks.values()} == {2}
    run = stack.wait_for(run_id, TERMINAL)
    assert run["status"] == "succeeded", (run, log_text(stack, run_id)[-3000:])
    assert_reported_once(stack, run_id, n)
    folder = stack.workdir / "runs" / str(run_id)
    config = (folder / "accelerate.yaml").read_text()
    assert "num_processes: 2" in config and "distributed_type: MULTI_GPU" in config
    logs = log_text(stack, run_id)
    assert "--- accelerate.yaml ---" in logs and "num_processes: 2" in logs
    page = httpx.get(f"{stack.url}/runs/{run_id}", timeout=30).text
    assert "2 processes" in page and "ddp" in page
    assert rank_rows(page) == {"0": [str(n), "ended"], "1": [str(n), "ended"]}  # the Devices panel
    none_left(stack, run_id, 10)


def test_form_launch_on_two_processes_reports_every_step_once(multi: Stack) -> None:
    stack, n = up(multi), 2
    form = {"name": "two-ranks-form", "model": TINY["model"], "dataset": TINY["dataset"],
            "reward_0_name": "length_target", "reward_0_weight": "1",
            "reward_0_params": "target=20", "num_generations": "4", "max_steps": str(n),
            "max_completion_length": "8", "logging_steps": "1", "num_processes": "2",
            "distributed": "ddp", "mixed_precision": "auto"}
    page = httpx.post(f"{stack.url}/runs/new", data=form, follow_redirects=False, timeout=30)
    assert page.status_code == 303, page.text
    run_id = int(page.headers["location"].rsplit("/", 1)[1])
    run = stack.wait_for(run_id, TERMINAL)
    assert run["status"] == "succeeded", (run, log_text(stack, run_id)[-3000:])
    assert run["spec"]["num_processes"] == 2
    assert_reported_once(stack, run_id, n)


def test_the_api_refuses_more_processes_than_the_worker_reported(multi: Stack) -> None:
    """The stack's worker reports its cores in the background once it is up, and the web app
    keeps a report for a minute: until it has this worker's, a launch is let through (and the
    worker refuses it at once); those runs are cancelled."""
    cores = len(os.sched_getaffinity(0))
    deadline = time.monotonic() + 150
    while (reply := httpx.post(f"{multi.url}/api/runs", timeout=30,
                               json={**TINY, "num_processes": cores + 1})).status_code == 201:
        httpx.post(f"{multi.url}/api/runs/{reply.json()['id']}/cancel", timeout=10)
        assert time.monotonic() < deadline, "the worker's device report never arrived"
        time.sleep(5)
    assert reply.status_code == 422, reply.text
    detail = reply.json()["detail"]
    assert detail[0]["loc"] == ["body", "num_processes"]
    assert f"{cores} CPU cores" in detail[0]["msg"]


def test_cancel_ends_every_rank(multi: Stack) -> None:
    stack = up(multi)
    run_id = stack.launch(name="two-ranks-cancel", max_steps=10_000, num_processes=2, **TINY)
    ranks = ranks_of(stack, run_id)
    stack.wait_until(lambda: stack.run(run_id)["step"] >= 2, "two steps trained")
    reply = httpx.post(f"{stack.url}/api/runs/{run_id}/cancel", timeout=10)
    assert reply.status_code in (200, 202), reply.text
    run = stack.wait_for(run_id, TERMINAL, timeout=120)
    assert run["status"] == "cancelled", run
    none_left(stack, run_id)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks.values())
    logs = log_text(stack, run_id)
    assert "rank 0/2" in logs and "stopping" in logs  # they stopped together, not by the kill
    step = stack.run(run_id)["step"]
    assert f"rank 1/2: step {step} done, stopping" in logs, logs[-3000:]


def test_a_rank_that_raises_fails_the_run_with_its_error(multi: Stack) -> None:
    stack = up(multi)
    run_id = stack.launch(name="rank-1-raises", max_steps=5, num_processes=2,
                          **{**TINY, "rewards": [{"name": "debug_raise",
                                                  "params": {"after_calls": 1, "rank": 1}}]})
    run = stack.wait_for(run_id, TERMINAL)
    assert run["status"] == "failed", run
    assert run["error"] == "rank 1: RuntimeError: debug_raise: reward function failed on call 2"
    assert "Traceback" in run["traceback_tail"] and "ChildFailedError" not in run["traceback_tail"]
    none_left(stack, run_id, 30)
    assert Path(stack.workdir / "runs" / str(run_id) / "ranks" / "rank1.error").exists()
    assert rank_failed_line(1, 2) in log_text(stack, run_id)
    page = httpx.get(f"{stack.url}/runs/{run_id}", timeout=30).text
    assert rank_rows(page)["1"][1] == "failed"


def test_worker_kill_9_leaves_no_rank_alive(multi: Stack) -> None:
    stack = up(multi)
    run_id = stack.launch(name="two-ranks-kill", max_steps=10_000, num_processes=2, **TINY)
    ranks = ranks_of(stack, run_id)
    stack.wait_until(lambda: stack.run(run_id)["step"] >= 1, "a step to arrive")
    launcher = ranks[0].parent()
    assert launcher is not None and "worker.training.launch" in " ".join(launcher.cmdline())
    supervisor = launcher.ppid()  # the Celery pool process
    os.kill(stack.named["worker"].pid, signal.SIGKILL)  # the main process; the pool follows
    os.kill(supervisor, signal.SIGKILL)
    none_left(stack, run_id, 20)
    run = stack.wait_for(run_id, TERMINAL, timeout=180)
    assert run["status"] == "failed" and "worker lost" in run["error"], run
    stack.kill("worker")
    stack.start_worker()
