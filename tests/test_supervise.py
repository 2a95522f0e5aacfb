"""The worker's supervision of the training process group: a trainer that ignores a stop
request is killed after the grace period, grandchildren included."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from worker.supervise import error_line, supervise, tail

STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is dead for our purpose
        return fh.read().split()[2] != "Z"


def test_stubborn_trainer_and_its_children_are_killed_after_grace(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN, str(pid_file)],
                            start_new_session=True)
    while not pid_file.exists() or not pid_file.read_text():
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    started = time.monotonic()
    rc = supervise(proc, should_stop=lambda: True, poll_seconds=0.1, grace_seconds=0.5)
    assert rc < 0 and time.monotonic() - started < 30
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_a_finishing_trainer_returns_its_code_without_stop() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    assert supervise(proc, should_stop=lambda: False, poll_seconds=0.1, grace_seconds=5) == 3


def test_error_line_picks_the_exception(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_text("Traceback (most recent call last):\n  File x\nRuntimeError: boom\nwarning: later\n")
    assert error_line(tail(log)) == "RuntimeError: boom"
