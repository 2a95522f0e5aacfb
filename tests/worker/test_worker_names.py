"""Two workers on one host get distinct names, ``<host>-<index>`` (issue 33: every worker was
``celery@<host>``, so two on one host shared one heartbeat row). A killed worker's name is free
again for the worker that replaces it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from worker.identity import take_name

HOLD = ("import sys, time; from pathlib import Path; from worker.identity import take_name; "
        "held = take_name(Path(sys.argv[1]), 'gpu-box'); print(held[0], flush=True); "
        "time.sleep(600)")


def holder(lock_dir: Path) -> tuple[subprocess.Popen[str], str]:
    """Another worker process on this host, holding its name; and that name."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_dir)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_two_workers_on_one_host_are_named_apart(tmp_path: Path) -> None:
    first, name = holder(tmp_path)
    try:
        assert name == "gpu-box-1"
        second, lock = take_name(tmp_path, "gpu-box")
        assert second == "gpu-box-2"
        lock.close()
    finally:
        first.kill()
        first.wait()


def test_a_killed_workers_name_goes_to_its_replacement(tmp_path: Path) -> None:
    first, name = holder(tmp_path)
    first.kill()  # SIGKILL: no cleanup ran, the kernel drops the lock
    first.wait()
    deadline = time.monotonic() + 10
    while (taken := take_name(tmp_path, "gpu-box"))[0] != name:
        taken[1].close()
        assert time.monotonic() < deadline, "the dead worker's name stayed taken"
    taken[1].close()
