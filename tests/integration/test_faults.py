"""Parts of a real stack die mid-run (issue 7, bugs 5-7): the web app goes down mid-run and at
the very end, and the Celery worker is kill -9-ed. Every step must arrive exactly once and the
run must end in the right status; no training may outlive its worker; the run token is never on
a command line or in the broker, and dies with its run.

Short bounds (settings) keep the waits small: a run whose worker is silent for 15 s is lost.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.conftest import live_stack
from tests.stack import TERMINAL, Stack

FAULT_ENV = {"GRPODECK_LOST_AFTER_SECONDS": "15", "GRPODECK_LOST_CHECK_SECONDS": "1",
             "GRPODECK_REPORT_DEADLINE_SECONDS": "240",
             "GRPODECK_BROKER_VISIBILITY_SECONDS": "20"}
TINY = {"model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "num_generations": 4, "max_completion_length": 8, "logging_steps": 1,
        "rewards": [{"name": "length_target", "params": {"target": 20}}]}
OUTAGE_S = 30  # the web app down for half a minute (the brief's hostile probe)


@pytest.fixture(scope="module", params=["embedded", "postgres-redis"])
def faulty(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Stack]:
    with live_stack(request.param, tmp_path_factory.mktemp(f"faults-{request.param}"),
                    FAULT_ENV, private_redis=True, scheduler=True) as live:
        yield live


def up(stack: Stack) -> Stack:
    """Bring back whatever an earlier test left down."""
    if stack.named["web"].poll() is not None:
        stack.start_web()
    if stack.named["worker"].poll() is not None:
        stack.start_worker()
    return stack


def child_of(stack: Stack, run_id: int, timeout: float = 240) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while (child := stack.training_child(run_id)) is None:
        assert time.monotonic() < deadline, f"no training child for run {run_id}\n{stack.log('worker')}"
        time.sleep(0.2)
    return child


TOKEN_IN_ENVIRON = re.compile(rb"GRPODECK_RUN_TOKEN=([A-Za-z0-9_\-]{32,})\x00")
CHUNK = 64 << 20  # read memory 64 MiB at a time


def _writable_anonymous(maps: str) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, is_heap)`` of each private writable mapping with no file behind it."""
    for line in maps.splitlines():
        fields = line.split()
        if fields[1].startswith("rw") and (len(fields) == 5 or fields[5] == "[heap]"):
            start, end = (int(edge, 16) for edge in fields[0].split("-"))
            yield start, end, len(fields) > 5


def environ_in_memory(pid: int) -> bytes:
    """The run token's ``KEY=value`` string as the C library's environment holds it in the
    process's memory: where a child forked warm (``worker.training.warm``) keeps the environment
    it was given after the fork (``/proc/PID/environ`` shows the block it was started with,
    its pool process's). ``setenv`` puts it in the main arena: the ``[heap]`` mapping, or, once
    ``brk`` could not grow that (a mapping in the way), anonymous mappings the arena went on in
    (CI saw a warm child whose heap held no token)."""
    maps = sorted(_writable_anonymous(Path(f"/proc/{pid}/maps").read_text()),
                  key=lambda mapping: not mapping[2])  # the heap first: almost always there
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for start, end, _ in maps:
            found = []
            for at in range(start, end, CHUNK):  # overlapping, so no string is cut in two
                mem.seek(at)
                try:
                    found += TOKEN_IN_ENVIRON.findall(mem.read(min(CHUNK + 256, end - at)))
                except OSError:  # a guard page, or a mapping gone since maps was read
                    break
            if found:
                return found[-1]
    return b""


def token_of(child: psutil.Process, timeout: float = 60) -> str:
    """The run token as the child holds it: in its environment (readable by its owner only),
    the block it was started with or, forked warm, the one it was given."""
    deadline = time.monotonic() + timeout
    while not (token := child.environ().get("GRPODECK_RUN_TOKEN")
               or environ_in_memory(child.pid).decode()):
        assert time.monotonic() < deadline, f"no run token in the memory of {child}"
        time.sleep(0.5)
    assert len(token) >= 32
    assert not any(token in part for part in child.cmdline())  # not visible in `ps`
    return token


def assert_token_is_dead(stack: Stack, run_id: int, token: str) -> None:
    late = httpx.post(f"{stack.url}/api/runs/{run_id}/metrics", timeout=10,
                      json={"rows": [{"step": 10_000, "metrics": {"loss": 1.0}}]},
                      headers={"Authorization": f"Bearer {token}"})
    assert late.status_code == 401, late.text
    assert token.encode() not in stack.broker_contents()


def steps_of(stack: Stack, run_id: int, name: str = "loss") -> list[int]:
    series = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", params={"names": name},
                       timeout=30).json()
    return series.get(name, {}).get("steps", [])


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_web_down_at_the_end_of_a_run_loses_nothing(faulty: Stack) -> None:
    stack, n = up(faulty), 8
    run_id = stack.launch(name="web-down-at-end", max_steps=n, **TINY)
    token = token_of(child_of(stack, run_id))
    stack.wait_until(lambda: max(stack.spool_steps(run_id), default=0) >= n - 3, "the last steps")
    stack.kill("web")
    down_at = time.monotonic()
    stack.wait_until(lambda: stack.training_done(run_id), "training to end during the outage")
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
    stack.start_web()
    run = stack.wait_for(run_id, TERMINAL, timeout=300)
    assert run["status"] == "succeeded", run
    assert steps_of(stack, run_id) == list(range(1, n + 1))
    assert_token_is_dead(stack, run_id, token)


def test_web_down_mid_run_loses_nothing(faulty: Stack) -> None:
    stack, n = up(faulty), 30
    run_id = stack.launch(name="web-down-mid-run", max_steps=n, **TINY)
    stack.wait_until(lambda: max(stack.spool_steps(run_id), default=0) >= 3, "three steps")
    stack.kill("web")
    time.sleep(OUTAGE_S)
    stack.start_web()
    run = stack.wait_for(run_id, TERMINAL, timeout=600)
    assert run["status"] == "succeeded", run
    assert steps_of(stack, run_id) == list(range(1, n + 1))


@pytest.mark.parametrize("target", ["main", "pool"])
def test_worker_kill_9_ends_the_training_and_the_run(faulty: Stack, target: str) -> None:
    """``main``: kill -9 of the Celery main process (its pool process dies with it, and the
    training child with that). ``pool``: kill -9 of the pool process that supervises the child;
    the surviving main process requeues the task (reject_on_worker_lost), and the redelivered
    message must not train the run again: the claim refuses it."""
    stack = up(faulty)
    run_id = stack.launch(name=f"worker-killed-{target}", max_steps=10_000, **TINY)
    child = child_of(stack, run_id)
    try:
        token = token_of(child)
        stack.wait_until(lambda: stack.run(run_id)["step"] >= 1, "a step to arrive")
    except BaseException:  # a 10,000-step run left training would starve the next test
        child.kill()
        raise
    victim = stack.named["worker"].pid if target == "main" else child.ppid()
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    stack.wait_until(lambda: gone(child.pid), "the orphaned training child to exit", 15)
    run = stack.wait_for(run_id, TERMINAL, timeout=90)
    assert run["status"] == "failed" and "worker lost" in run["error"], run
    assert time.monotonic() - killed_at < 90
    # The dying child sent what it had logged but not yet delivered (its last words); only a
    # step logged in the instant between those words and the group kill may be missing.
    logged, arrived = set(stack.spool_steps(run_id)), set(steps_of(stack, run_id))
    assert arrived <= logged and logged - arrived <= {max(logged)}, (logged, arrived)
    assert_token_is_dead(stack, run_id, token)
    if target == "main":
        stack.kill("worker")  # whatever is left of its group
        stack.start_worker()
    short = stack.launch(name="after-kill", max_steps=2, **TINY)  # the worker takes new runs
    assert stack.wait_for(short, TERMINAL, timeout=300)["status"] == "succeeded"
    assert stack.run(run_id)["status"] == "failed" and stack.training_child(run_id) is None
