"""`grpodeck up` (what `make run` runs): the dashboard, a worker and the scheduler as one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.core.config import ROOT


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], check=True, capture_output=True,
                           text=True).stdout.split()
    return [int(p) for p in found]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait(condition, what: str, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_killing_up_with_sigkill_takes_its_worker_and_scheduler_with_it(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to clean up: the kernel must end the children (the gap was a
    worker left taking runs for a dashboard that no longer existed)."""
    port = _free_port()
    env = {**os.environ, "GRPODECK_DATABASE_URL": f"sqlite:///{tmp_path / 'deck.db'}",
           "GRPODECK_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.db'}",
           "GRPODECK_RUNS_DIR": str(tmp_path / "runs"), "GRPODECK_QUEUE": f"up-{port}"}
    log = (tmp_path / "up.log").open("wb")
    up = subprocess.Popen([sys.executable, "-m", "app.cli", "up", "--port", str(port)], env=env,
                          cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: _up_listening(port), "the dashboard")
        children = _children(up.pid)
        assert len(children) == 2, children  # the worker and the scheduler
        up.kill()
        up.wait()
        _wait(lambda: not any(_alive(pid) for pid in children), "the children to exit", 90)
    finally:
        os.killpg(up.pid, signal.SIGKILL) if _group_alive(up.pid) else None


def _up_listening(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
