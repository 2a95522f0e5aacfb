"""SIGTERM ends a worker within its shutdown grace, whatever it was doing (issue 33: a worker
stayed alive after SIGTERM; ``grpodeck up`` logged "ignored SIGTERM for 30 s: killed").

Real processes: the web app and a Celery worker training a long run. ``docker stop`` and
``grpodeck up`` signal the main process only; systemd signals the whole group. The stuck case
freezes the training child (SIGSTOP): it cannot obey its SIGTERM, and its cancel grace (120 s)
is far longer than the worker's shutdown grace (8 s), so only the watchdog can end it in time.
The run is left to the lost-run check, as the README says of a stopped worker.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

from tests.conftest import tiny_spec
from tests.integration.conftest import live_stack
from tests.stack import Stack

GRACE_S = 8
ENV = {"GRPODECK_SHUTDOWN_GRACE_SECONDS": str(GRACE_S), "GRPODECK_CANCEL_GRACE_SECONDS": "120"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with live_stack("embedded", tmp_path_factory.mktemp("shutdown"), ENV) as live:
        yield live


def training(stack: Stack) -> psutil.Process:
    """A long run's training child, once it has logged a step (the worker is busy)."""
    if stack.named["worker"].poll() is not None:
        stack.start_worker()
    run_id = stack.launch(**tiny_spec(name="long", max_steps=100_000))
    stack.wait_for(run_id, {"running"}, timeout=300)
    stack.wait_until(lambda: bool(stack.spool_steps(run_id)), "a training step", timeout=300)
    child = stack.training_child(run_id)
    assert child is not None
    return child


def frozen(stack: Stack, child: psutil.Process) -> None:
    """SIGSTOP the child and wait until it is stopped. A stop is acted on only when the child
    next handles signals: in a slow write it is still pending when the worker's SIGTERM lands,
    and Linux hands out the lower-numbered SIGTERM first, so the child would die of it."""
    child.suspend()
    stack.wait_until(lambda: child.status() == psutil.STATUS_STOPPED, "the child stopped",
                     timeout=30)


def exits_within(stack: Stack, seconds: float) -> float:
    started = time.monotonic()
    stack.named["worker"].wait(timeout=seconds)
    return time.monotonic() - started


def test_sigterm_to_the_main_process_stops_a_busy_worker(stack: Stack) -> None:
    """What ``docker stop`` and ``grpodeck up`` send (the process group's case is tested from
    the installed wheel, tests/packaging/test_installed_server.py)."""
    child = training(stack)
    os.kill(stack.named["worker"].pid, signal.SIGTERM)
    took = exits_within(stack, GRACE_S + 20)
    assert took < GRACE_S + 20
    psutil.wait_procs([child], timeout=15)
    assert not child.is_running(), "the training child outlived its stopped worker"


def test_a_worker_whose_task_cannot_stop_ends_at_its_shutdown_grace(stack: Stack) -> None:
    child = training(stack)
    frozen(stack, child)  # its SIGTERM waits, and the task waits its 120 s grace for it
    try:
        os.kill(stack.named["worker"].pid, signal.SIGTERM)
        took = exits_within(stack, GRACE_S + 20)
        assert GRACE_S - 1 <= took, "ended before its grace: the watchdog is not what ended it"
        assert "still stopping after" in stack.log("worker")
        psutil.wait_procs([child], timeout=15)
        assert not child.is_running(), "the frozen training child outlived its worker"
    finally:
        if child.is_running():
            child.kill()
