"""`grpodeck worker` (the compose workers' command) hands its process to Celery, so a stop
signal reaches Celery itself: `docker stop` (SIGTERM to PID 1) gives a warm shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core.config import ROOT


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`grpodeck worker` in its own process group, returned once Celery says it is ready."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "worker"], env=env, cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while b"ready" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError(log.read_text())
        time.sleep(0.2)
    return proc


def test_sigterm_to_grpodeck_worker_is_a_celery_warm_shutdown(tmp_path: Path) -> None:
    env = {**os.environ, "GRPODECK_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.db'}",
           "GRPODECK_RUNS_DIR": str(tmp_path / "runs"), "GRPODECK_QUEUE": f"cli-{os.getpid()}"}
    log = tmp_path / "worker.log"
    proc = _start_worker(env, log)
    try:
        title = Path(f"/proc/{proc.pid}/cmdline").read_bytes()  # Celery sets its process title
        assert b"MainProcess" in title, title  # the same pid, now Celery's main process
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
        assert b"Warm shutdown" in log.read_bytes()
        time.sleep(1)
        assert not _group_alive(proc.pid), "a pool process outlived the worker"
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _worker_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "GRPODECK_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.db'}",
            "GRPODECK_RUNS_DIR": str(tmp_path / "runs"), "GRPODECK_QUEUE": f"cli-{os.getpid()}",
            **extra}


def test_grpodeck_worker_runs_one_pool_process_per_device_slot(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    proc = _start_worker(_worker_env(tmp_path, GRPODECK_DEVICE_SLOTS="0;1;2",
                                     CUDA_VISIBLE_DEVICES="0,1,2"), log)
    try:
        assert "concurrency: 3 (prefork)" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize(("extra", "reason"), [
    ({"GRPODECK_DEVICE_SLOTS": "0,1;1"}, "device 1 is in slot 1 and slot 2"),
    ({"GRPODECK_DEVICE_SLOTS": "0;;1"}, "slot 2 has an empty device"),
    ({"GRPODECK_GPUS_PER_RUN": "2", "CUDA_VISIBLE_DEVICES": "0"},
     "GRPODECK_GPUS_PER_RUN=2, but this worker finds 1 GPU(s) (0)"),
    ({"GRPODECK_GPUS_PER_RUN": "1", "GRPODECK_DEVICE_SLOTS": "0"}, "not both"),
    ({"GRPODECK_DEVICE_SLOTS": "0;1", "CUDA_VISIBLE_DEVICES": ""},
     "GRPODECK_DEVICE_SLOTS='0;1', but this worker finds no GPU"),
])
def test_a_bad_slot_setting_stops_the_worker_at_start_with_its_reason(
        tmp_path: Path, extra: dict[str, str], reason: str) -> None:
    done = subprocess.run([sys.executable, "-m", "app.cli", "worker"], cwd=ROOT, timeout=120,
                          env=_worker_env(tmp_path, **extra), capture_output=True, text=True,
                          check=False)
    assert done.returncode != 0
    assert done.stderr.startswith("grpodeck worker: ") and reason in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
