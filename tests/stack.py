"""A real GRPO Deck stack for integration and browser tests: uvicorn + a Celery worker.

Both run as separate processes configured only through environment variables, exactly as a
user would start them; the test talks to them over HTTP.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.core.config import ROOT

TERMINAL = {"succeeded", "failed", "cancelled"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Stack:
    database_url: str
    broker_url: str
    workdir: Path
    port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    scheduler: bool = False  # also run `grpodeck scheduler` (alert sender, lost-run check)
    extra_env: dict[str, str] = field(default_factory=dict)
    named: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "GRPODECK_DATABASE_URL": self.database_url,
                "GRPODECK_BROKER_URL": self.broker_url, "GRPODECK_PUBLIC_URL": self.url,
                "GRPODECK_QUEUE": f"test-{uuid.uuid4().hex[:8]}",
                "GRPODECK_RUNS_DIR": str(self.workdir / "runs"),
                "GRPODECK_CANCEL_GRACE_SECONDS": "15", "GRPODECK_LIVE_REFRESH_SECONDS": "1",
                "PYTHONUNBUFFERED": "1", **self.extra_env}

    def start(self) -> Stack:
        env = self.env  # one queue name for both processes
        subprocess.run([sys.executable, "-m", "app.cli", "migrate"], env=env, cwd=ROOT, check=True)
        self._spawn("web", [sys.executable, "-m", "uvicorn", "app.main:app", "--host",
                            "127.0.0.1", "--port", str(self.port)], env)
        self._spawn("worker", [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker",
                               "--pool=prefork", "--concurrency=1", "-Q", env["GRPODECK_QUEUE"],
                               "--loglevel=INFO"], env)
        if self.scheduler:
            self._spawn("scheduler", [sys.executable, "-m", "app.cli", "scheduler"], env)
        self._wait_ready()
        return self

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        log = (self.workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        self.named[name] = proc

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise RuntimeError(f"web app did not start:\n{self.log('web')}")

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

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
