"""`grpodeck worker` (the compose workers' command) hands its process to Celery, so a stop
signal reaches Celery itself: `docker stop` (SIGTERM to PID 1) gives a warm shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.core.config import ROOT


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_to_grpodeck_worker_is_a_celery_warm_shutdown(tmp_path: Path) -> None:
    env = {**os.environ, "GRPODECK_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.db'}",
           "GRPODECK_RUNS_DIR": str(tmp_path / "runs"), "GRPODECK_QUEUE": f"cli-{os.getpid()}"}
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "worker"], env=env, cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while b"ready" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
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
