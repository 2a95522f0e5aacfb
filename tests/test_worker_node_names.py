"""Issue 55: two Celery workers on one host were both ``celery@<host>``, so ``celery inspect
ping`` counted one node (Celery warns of the clash; remote control reached one of them). Each
worker process the project starts now has a name of its own: two real `grpodeck worker`
processes on one Redis answer the ping as two nodes (one named by default, one as the compose
file names it, whose healthcheck then pings it by that name), and `grpodeck up`'s worker is
named too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from app.cli import worker_command
from app.core.config import ROOT
from tests.stack import PrivateRedis
from tests.test_worker_cli import _group_alive, _start_worker, _worker_env


def _ping(env: dict[str, str]) -> dict[str, object]:
    """{node name: reply} of every worker answering ``celery inspect ping`` on the broker."""
    done = subprocess.run([sys.executable, "-m", "celery", "-A", "worker.celery_app", "inspect",
                           "ping", "--json", "--timeout", "5"], cwd=ROOT, env=env, timeout=120,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compose_healthcheck() -> str:
    """The compose workers' healthcheck command, as the file has it."""
    model = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    test = model["x-worker"]["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL", test
    return test[1].replace("python ", f"{sys.executable} ", 1)


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    if _group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_two_workers_on_one_host_answer_a_ping_as_two_nodes(tmp_path: Path) -> None:
    redis = PrivateRedis(tmp_path / "redis").start()
    env = _worker_env(tmp_path, GRPODECK_BROKER_URL=redis.url,
                      GRPODECK_DEVICE_LOCKS_DIR=str(tmp_path / "locks"))
    workers = []
    try:
        workers.append(_start_worker(env, tmp_path / "worker1.log"))
        workers.append(_start_worker({**env, "GRPODECK_WORKER_NODE": "gpu1"},
                                     tmp_path / "worker2.log"))  # as compose names them
        nodes = _ping(env)
        assert len(nodes) == 2, nodes
        host = socket.gethostname()
        assert set(nodes) == {f"grpodeck-{workers[0].pid}@{host}", f"gpu1@{host}"}, nodes
        log = (tmp_path / "worker2.log").read_text()
        assert "DuplicateNodenameWarning" not in log, log
        healthcheck = _compose_healthcheck().replace("$$", "$")
        done = subprocess.run(["sh", "-c", healthcheck], cwd=ROOT, timeout=120, check=False,
                              env={**env, "GRPODECK_WORKER_NODE": "gpu1", "HOSTNAME": host},
                              capture_output=True, text=True)
        assert done.returncode == 0 and "pong" in done.stdout, done.stdout + done.stderr
    finally:
        for proc in workers:
            _end(proc)
        redis.stop()


def test_up_names_its_worker_after_its_own_pid() -> None:
    """`up` builds its worker's command once (restarts reuse it): one `up` runs one worker, so
    its own pid keeps two `up`s on one host apart."""
    command = worker_command()
    assert command[command.index("-n") + 1] == f"grpodeck-{os.getpid()}@%h"
    named = worker_command(name="gpu1")
    assert named[named.index("-n") + 1] == "gpu1@%h"
