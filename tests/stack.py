"""A real GRPO Deck stack for integration and browser tests: uvicorn + a Celery worker.

Both run as separate processes configured only through environment variables, exactly as a
user would start them; the test talks to them over HTTP.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from app.core.config import ROOT

TERMINAL = {"succeeded", "failed", "cancelled"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the process group a child leads (its own session); gone already is fine."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself holds the listening socket on ``port``."""
    try:
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in psutil.Process(pid).net_connections(kind="inet"))
    except psutil.NoSuchProcess:
        return False


def wait_healthy(url: str, proc: subprocess.Popen[Any], log: Callable[[], str],
                 timeout: float = 60, port: int | None = None) -> None:
    """Return once the web app at ``url`` answers ``/healthz``; RuntimeError with its ``log``
    when ``proc`` exits first or ``timeout`` passes. With ``port``, the answer counts only once
    ``proc`` listens there itself: a free port picked for a stack can be taken by another
    stack's server before this one binds it, and that server's 200 sent a whole test module
    to the wrong stack (seen in CI: "address already in use" in this one's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the web app exited during start:\n{log()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200 and (
                    port is None or listens(proc.pid, port)):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"web app did not start:\n{log()}")


@dataclass
class Stack:
    database_url: str
    broker_url: str
    workdir: Path
    port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    scheduler: bool = False  # also run `grpodeck scheduler` (alert sender, lost-run check)
    named: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    queue: str = field(default_factory=lambda: f"test-{uuid.uuid4().hex[:8]}")
    worker_concurrency: int | None = 1  # None: the worker decides (one per device slot)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "GRPODECK_DATABASE_URL": self.database_url,
                "GRPODECK_BROKER_URL": self.broker_url, "GRPODECK_PUBLIC_URL": self.url,
                "GRPODECK_QUEUE": self.queue,
                "GRPODECK_RUNS_DIR": str(self.workdir / "runs"),
                "GRPODECK_DATASETS_DIR": str(self.workdir / "datasets"),
                "GRPODECK_ARTIFACTS_DIR": str(self.workdir / "artifacts"),
                "GRPODECK_MODELS_DIR": str(self.workdir / "models"),
                "GRPODECK_CANCEL_GRACE_SECONDS": "15", "GRPODECK_LIVE_REFRESH_SECONDS": "1",
                "PYTHONUNBUFFERED": "1", **self.extra_env}

    def migrate(self) -> Stack:
        subprocess.run([sys.executable, "-m", "app.cli", "migrate"], env=self.env, cwd=ROOT,
                       check=True, timeout=120)
        return self

    def start(self) -> Stack:
        try:
            self.migrate()
            self._start_web_on_a_free_port()
            self.start_worker()
            if self.scheduler:
                self._spawn("scheduler", [sys.executable, "-m", "app.cli", "scheduler"])
        except BaseException:
            self.stop()  # a failed start leaves no processes behind
            raise
        return self

    def _start_web_on_a_free_port(self, tries: int = 3) -> None:
        """The first start: another process may take the picked port first; pick another."""
        for attempt in range(tries):
            try:
                self.start_web()
                return
            except RuntimeError as exc:
                if "address already in use" not in str(exc) or attempt == tries - 1:
                    raise
                self.port = free_port()

    def start_web(self) -> None:
        """(Re)start uvicorn on the same port and database."""
        self._spawn("web", [sys.executable, "-m", "uvicorn", "app.main:app", "--host",
                            "127.0.0.1", "--port", str(self.port)])
        self._wait_ready()

    def start_worker(self) -> None:
        chosen = [] if self.worker_concurrency is None else [
            f"--concurrency={self.worker_concurrency}"]
        self._spawn("worker", [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
                               "--pool=prefork", *chosen, "-Q", self.queue, "--loglevel=INFO"])

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 30) -> None:
        """Signal a part's whole process group (uvicorn, or the Celery main and pool processes)
        and wait for its main process to exit."""
        proc = self.named[name]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
        proc.wait(timeout=timeout)

    def _spawn(self, name: str, cmd: list[str]) -> None:
        with (self.workdir / f"{name}.log").open("ab") as log:  # the child keeps its own copy
            proc = subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        self.named[name] = proc

    def _wait_ready(self, timeout: float = 60) -> None:
        # the latest web process, not an old one
        wait_healthy(self.url, self.named["web"], lambda: self.log("web"), timeout,
                     port=self.port)

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def stop(self) -> None:
        """Stop every spawned process group, children included (safe to call twice, or after
        a failed start)."""
        for proc in self.procs:
            _signal_group(proc, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=20)
            _signal_group(proc, signal.SIGKILL)  # a prefork child outliving its parent
        self.procs.clear()

    def launch(self, **spec: Any) -> int:
        response = httpx.post(f"{self.url}/api/runs", json=spec, timeout=30)
        assert response.status_code == 201, response.text
        return int(response.json()["id"])

    def run(self, run_id: int) -> dict[str, Any]:
        return httpx.get(f"{self.url}/api/runs/{run_id}", timeout=10).json()

    def wait_until(self, check: Callable[[], bool], what: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for: {what}\nworker log:\n{self.log('worker')}")

    def wait_for(self, run_id: int, statuses: set[str], timeout: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run["status"] in statuses:
                return run
            time.sleep(0.5)
        raise AssertionError(f"run {run_id} still {self.run(run_id)['status']}\n"
                             f"worker log:\n{self.log('worker')}")

    # -- fault drills: what a test needs to see of the training child and the broker -----------
    def training_child(self, run_id: int) -> psutil.Process | None:
        """The training child of ``run_id`` started by this stack's worker, if it is running."""
        runs_dir = str(self.workdir / "runs")
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if ("worker.training.child" in cmd and str(run_id) in cmd
                    and any(part.startswith(runs_dir) for part in cmd)):
                return proc
        return None

    def spool_steps(self, run_id: int) -> list[int]:
        """Steps the child has logged so far (its local spool), delivered or not."""
        path = self.workdir / "runs" / str(run_id) / "metrics.jsonl"
        if not path.exists():
            return []
        steps = []
        for line in path.read_text().splitlines():
            try:
                steps.append(int(json.loads(line)["step"]))
            except (ValueError, KeyError, TypeError):
                continue
        return steps

    def training_done(self, run_id: int) -> bool:
        """The child logged its end-of-training summary (whether or not it was delivered)."""
        path = self.workdir / "runs" / str(run_id) / "metrics.jsonl"
        return path.exists() and "train_runtime" in path.read_text()

    def broker_contents(self) -> bytes:
        """Everything the broker stores now: the SQLite file, or every key of the Redis db."""
        if self.broker_url.startswith("sqla+sqlite"):
            return Path(self.broker_url.split("///", 1)[1]).read_bytes()
        client = redis.Redis.from_url(self.broker_url)
        out = []
        for key in client.scan_iter():
            kind = client.type(key)
            if kind == b"list":
                out += client.lrange(key, 0, -1)
            elif kind == b"hash":
                out += client.hvals(key)
            elif kind == b"string":
                out.append(client.get(key) or b"")
            elif kind == b"zset":
                out += client.zrange(key, 0, -1)
            elif kind == b"set":
                out += list(client.smembers(key))
        return b"\n".join(out)


@dataclass
class PrivateRedis:
    """A redis-server of our own on a free port (never the shared one), restartable, with an
    append-only file so a restart keeps queued messages, as docker-compose runs it."""

    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20) -> PrivateRedis:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.workdir), "--appendonly", "yes", "--save", ""],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError("private redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # redis saves its append-only file on SIGTERM
            self.proc.wait(timeout=20)


@contextmanager
def migrated_sqlite(workdir: Path, extra_env: dict[str, str] | None = None) -> Iterator[Stack]:
    """A migrated Deck on SQLite and the embedded broker in ``workdir``, whose processes each
    test starts when it should answer (outage tests); stopped afterwards."""
    live = Stack(f"sqlite:///{workdir / 'grpodeck.db'}", f"sqla+sqlite:///{workdir / 'broker.db'}",
                 workdir, extra_env=extra_env or {})
    try:
        yield live.migrate()
    finally:
        live.stop()
