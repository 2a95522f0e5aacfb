"""`grpodeck up`'s supervisor: the restart delay policy, and a real child that dies is reaped,
logged with its exit code or signal, and started again."""

from __future__ import annotations

import logging
import sys
import time

import pytest

from app.supervisor import Backoff, Child, Supervisor, describe_exit


def test_backoff_doubles_from_one_second_is_capped_at_30_and_resets_after_a_stable_run() -> None:
    backoff = Backoff()
    quick = [backoff.delay(ran_seconds=0.5) for _ in range(8)]
    assert quick == [1, 2, 4, 8, 16, 30, 30, 30]
    assert backoff.delay(ran_seconds=59) == 30  # not stable yet: still capped
    assert backoff.delay(ran_seconds=60) == 1  # it stayed up: a fresh start
    assert backoff.delay(ran_seconds=0.1) == 2


def test_describe_exit_names_the_signal() -> None:
    assert describe_exit(-9) == "signal SIGKILL"
    assert describe_exit(3) == "exit code 3"


def test_a_dying_child_is_restarted_and_each_restart_logged(caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    child = Child("crasher", [sys.executable, "-c", "raise SystemExit(3)"],
                  backoff=Backoff(initial=0.05, cap=0.1))
    supervisor = Supervisor([child], poll_seconds=0.02)
    pids: set[int] = set()
    loops = 0

    def sleep(seconds: float) -> None:  # the loop's pause: stop once it restarted twice
        nonlocal loops
        assert child.proc is not None
        pids.add(child.proc.pid)
        loops += 1
        if (child.restarts >= 2 and child.proc.poll() is not None) or loops > 2000:
            supervisor.stopping = True
        time.sleep(seconds)

    with caplog.at_level(logging.INFO, logger="grpodeck.up"):
        supervisor.run(sleep=sleep)
    assert len(pids) == 3 and child.restarts == 2
    died = [r.getMessage() for r in caplog.records if "died" in r.getMessage()]
    assert len(died) >= 2 and all("exit code 3" in m for m in died), died
    assert child.proc is not None and child.proc.poll() == 3  # reaped: no zombie left


def test_stopping_terminates_every_child() -> None:
    child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"])
    supervisor = Supervisor([child], poll_seconds=0.02)

    def sleep(_: float) -> None:
        supervisor.stopping = True  # as SIGTERM's handler does

    supervisor.run(sleep=sleep)
    assert child.proc is not None and child.proc.returncode == -15
