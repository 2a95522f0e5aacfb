"""The worker's supervision of the training process group: a trainer that ignores a stop
request is killed once the grace it was given has passed (not a fixed time later), grandchildren
included. Every wait has a deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from worker.supervise import error_line, supervise, tail

STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1] + ".tmp", "w").write(str(child.pid))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:  # a zombie is dead for our purpose
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


def test_stubborn_trainer_and_its_children_are_killed_when_the_grace_ends(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN, str(pid_file)],
                            start_new_session=True)
    try:
        wait_for(pid_file.exists, "the stubborn trainer to start its grandchild")
        grandchild = int(pid_file.read_text())
        grace = 0.5
        started = time.monotonic()
        rc = supervise(proc, should_stop=lambda: True, poll_seconds=0.1, grace_seconds=grace)
        took = time.monotonic() - started
        # Graceful window, then SIGTERM (ignored), then SIGKILL after the same grace: about 1 s.
        # The old fixed 10 s wait after SIGTERM made this 10.5 s.
        assert rc < 0 and took < 2 * grace + 3, (rc, took)
        wait_for(lambda: not alive(grandchild), "the grandchild to die with its group", 5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def test_a_finishing_trainer_returns_its_code_without_stop() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    assert supervise(proc, should_stop=lambda: False, poll_seconds=0.1, grace_seconds=5) == 3


def test_no_stop_request_means_no_kill(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"],
                            start_new_session=True)
    assert supervise(proc, should_stop=lambda: False, poll_seconds=0.1, grace_seconds=0.1) == 0


def test_error_line_picks_the_exception(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_text("Traceback (most recent call last):\n  File x\nRuntimeError: boom\nwarning: later\n")
    assert error_line(tail(log)) == "RuntimeError: boom"
