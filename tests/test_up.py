"""`grpodeck up` (what `make run` runs): the dashboard, a worker and the scheduler, supervised.

A child that is ``kill -9``-ed comes back (and the worker then takes queued runs; the scheduler
beats again); the children of a killed worker (training and dry runs) die with it; and the
children die with ``up`` itself, even when it is ``kill -9``-ed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from app.core.config import ROOT
from tests.conftest import tiny_spec

RESTART_LIMIT_S = 10.0  # issue 21: a killed worker or scheduler is back within 10 s


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


def _wait(condition: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Up:
    """A running `grpodeck up` and what a test needs to see of it."""

    proc: subprocess.Popen[bytes]
    port: int
    workdir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def child(self, marker: str) -> int | None:
        """The pid of the live child whose command line contains ``marker``."""
        for pid in _children(self.proc.pid):
            try:
                if marker in " ".join(psutil.Process(pid).cmdline()) and _alive(pid):
                    return pid
            except psutil.NoSuchProcess:
                continue
        return None

    def heartbeat(self, kind: str) -> tuple[int, str] | None:
        """(pid, last_seen_at) of the latest heartbeat of ``kind``, read from the database."""
        with sqlite3.connect(self.workdir / "deck.db") as db:
            return db.execute("SELECT pid, last_seen_at FROM heartbeats WHERE kind = ? "
                              "ORDER BY last_seen_at DESC LIMIT 1", (kind,)).fetchone()

    def log(self) -> str:
        return (self.workdir / "up.log").read_text(errors="replace")

    def restarted(self, marker: str, old: int, killed_at: float) -> float:
        """Seconds from ``killed_at`` until a new ``marker`` child replaced ``old``."""
        _wait(lambda: (self.child(marker) or old) != old, f"a new {marker} child",
              RESTART_LIMIT_S - (time.monotonic() - killed_at))
        return time.monotonic() - killed_at


def _start_up(workdir: Path, **env: str) -> Up:
    port = _free_port()
    environment = {**os.environ, "GRPODECK_DATABASE_URL": f"sqlite:///{workdir / 'deck.db'}",
                   "GRPODECK_BROKER_URL": f"sqla+sqlite:///{workdir / 'broker.db'}",
                   "GRPODECK_RUNS_DIR": str(workdir / "runs"), "GRPODECK_QUEUE": f"up-{port}",
                   "GRPODECK_HEARTBEAT_SECONDS": "0.5", "PYTHONUNBUFFERED": "1", **env}
    environment.pop("GRPODECK_REPORT_URL", None)  # `up` points its children at its own port
    with (workdir / "up.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "up", "--port", str(port)],
                                env=environment, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    up = Up(proc, port, workdir)
    _wait(lambda: _up_listening(port), "the dashboard")
    return up


def _stop(up: Up) -> None:
    if _group_alive(up.proc.pid):
        os.killpg(up.proc.pid, signal.SIGTERM)
        try:
            up.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    if _group_alive(up.proc.pid):
        os.killpg(up.proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    # With a worker secret the web app takes only heartbeats that carry it, from loopback too:
    # the worker's beats arriving proves both ends read it
    running = _start_up(tmp_path_factory.mktemp("up"), GRPODECK_WORKER_SECRET="up-test-secret")
    try:
        _wait(lambda: running.heartbeat("worker") and running.heartbeat("scheduler"),
              "the first heartbeats", 120)
        yield running
    finally:
        _stop(running)


def test_kill_9_of_the_worker_is_restarted_and_a_queued_run_then_finishes(up: Up) -> None:
    worker = up.child("celery")
    assert worker is not None
    os.kill(worker, signal.SIGKILL)
    killed_at = time.monotonic()
    run = httpx.post(f"{up.url}/api/runs", json=tiny_spec(name="after-kill", max_steps=2),
                     timeout=30)  # queued while no worker runs
    assert run.status_code == 201, run.text
    took = up.restarted("celery", worker, killed_at)
    new = up.child("celery")
    _wait(lambda: (beat := up.heartbeat("worker")) is not None and beat[0] == new,
          "the new worker's heartbeat", 60)
    print(f"worker restarted after {took:.2f} s, beating again after "  # quoted in the report
          f"{time.monotonic() - killed_at:.2f} s")
    assert f"worker (pid {worker}) died with signal SIGKILL" in up.log()
    url = f"{up.url}/api/runs/{run.json()['id']}"
    _wait(lambda: httpx.get(url).json()["status"] in {"succeeded", "failed", "cancelled"},
          "the queued run to end", 300)
    assert httpx.get(url).json()["status"] == "succeeded", up.log()[-4000:]


def test_kill_9_of_the_scheduler_is_restarted_and_its_heartbeat_resumes(up: Up) -> None:
    scheduler = up.child("app.scheduler")
    assert scheduler is not None
    os.kill(scheduler, signal.SIGKILL)
    killed_at = time.monotonic()
    took = up.restarted("app.scheduler", scheduler, killed_at)
    print(f"scheduler restarted after {took:.2f} s")
    new = up.child("app.scheduler")
    _wait(lambda: (beat := up.heartbeat("scheduler")) is not None and beat[0] == new,
          "the new scheduler's heartbeat", 60)
    print(f"scheduler beating again after {time.monotonic() - killed_at:.2f} s")
    assert "died with signal SIGKILL" in up.log()
    health = httpx.get(f"{up.url}/healthz", params={"strict": 1})
    assert health.status_code == 200, health.text


def _descendant(root: int, marker: str) -> int | None:
    try:
        for proc in psutil.Process(root).children(recursive=True):
            if marker in " ".join(proc.cmdline()) and _alive(proc.pid):
                return proc.pid
    except psutil.NoSuchProcess:
        pass
    return None


def _kill_worker_under(up: Up, marker: str, start: Callable[[], None]) -> None:
    """Start work, kill -9 the worker as soon as its ``marker`` child exists, and check that
    child (by pid) dies with it rather than running on, orphaned."""
    _wait(lambda: up.child("celery") and up.heartbeat("worker"), "a worker", 60)
    worker = up.child("celery")
    assert worker is not None
    start()
    _wait(lambda: _descendant(worker, marker), f"the {marker} child", 180)
    child = _descendant(worker, marker)
    assert child is not None
    os.kill(worker, signal.SIGKILL)
    killed_at = time.monotonic()
    _wait(lambda: not _alive(child), f"the {marker} child (pid {child}) to die", 5)
    up.restarted("celery", worker, killed_at)


def test_no_dry_run_or_training_child_outlives_a_kill_9_worker(up: Up) -> None:
    """Before: a dry-run child was re-parented to pid 1 and sampled on for minutes."""
    heavy = tiny_spec(name="dry", max_completion_length=512, num_generations=16)

    def dry_run() -> None:
        reply = httpx.post(f"{up.url}/api/dry-runs", params={"prompts": 8}, json=heavy, timeout=30)
        assert reply.status_code == 202, reply.text

    def training() -> None:
        reply = httpx.post(f"{up.url}/api/runs", json=tiny_spec(name="long", max_steps=10_000),
                           timeout=30)
        assert reply.status_code == 201, reply.text

    _kill_worker_under(up, "worker.dry_run", dry_run)
    _kill_worker_under(up, "worker.training.child", training)


def test_killing_up_with_sigkill_takes_its_children_with_it(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to clean up: the kernel must end the children (the gap was a
    worker left taking runs for a dashboard that no longer existed)."""
    up = _start_up(tmp_path)
    try:
        children = _children(up.proc.pid)
        assert len(children) == 3, children  # the web app, the worker and the scheduler
        up.proc.kill()
        up.proc.wait()
        _wait(lambda: not any(_alive(pid) for pid in children), "the children to exit", 90)
    finally:
        _stop(up)


def test_sigterm_to_up_stops_every_child_before_it_exits(tmp_path: Path) -> None:
    """What `docker stop` or systemd sends: up stops its children itself and exits cleanly
    (not killed by the signal with its children left to the kernel)."""
    up = _start_up(tmp_path)
    try:
        children = _children(up.proc.pid)
        assert len(children) == 3, children
        up.proc.send_signal(signal.SIGTERM)
        assert up.proc.wait(timeout=90) == 0
        assert not any(_alive(pid) for pid in children)
        assert "SIGTERM: stopping every child" in up.log()
    finally:
        _stop(up)


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
