"""Thin Celery tasks: claim the run, start the training child, report how it ended."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from typing import Any

from app.core.config import get_settings
from worker.celery_app import celery_app
from worker.run_client import RunClient, RunConflict
from worker.supervise import error_line, kill_group, supervise, tail

log = logging.getLogger(__name__)


def _child_command(run_id: int, spec_path: str, report_url: str, token: str,
                   output_dir: str) -> list[str]:
    return [sys.executable, "-m", "worker.training.child", "--spec", spec_path,
            "--run-id", str(run_id), "--report-url", report_url, "--token", token,
            "--output-dir", output_dir]


@celery_app.task(name="grpodeck.train_run")
def train_run(run_id: int, spec: dict[str, Any], report_url: str, token: str) -> int | None:
    settings = get_settings()
    client = RunClient(report_url, run_id, token)
    try:
        client.started(pid=os.getpid(), host=socket.gethostname())
    except RunConflict as exc:  # cancelled while it waited in the queue
        log.info("run %s not started: %s", run_id, exc)
        return None
    out = settings.runs_dir / str(run_id)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.json").write_text(json.dumps(spec))
    stderr_path = out / "stderr.log"
    with (out / "stdout.log").open("wb") as stdout, stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            _child_command(run_id, str(out / "spec.json"), report_url, token, str(out)),
            stdout=stdout, stderr=stderr, start_new_session=True,
        )
        rc = _wait(proc, client, settings.control_poll_seconds, settings.cancel_grace_seconds)
    err_tail = tail(stderr_path)
    client.finished(rc, error_line(err_tail) if rc else None, err_tail if rc else None)
    client.close()
    return rc


def _stop_requested(client: RunClient) -> bool:
    """An unreachable web app is not a stop request: keep training, the next poll may succeed."""
    try:
        return bool(client.control().get("stop"))
    except Exception as exc:  # noqa: BLE001 - any failure to ask means "no answer"
        log.warning("run %s: control poll failed: %s", client.run_id, exc)
        return False


def _wait(proc: subprocess.Popen[bytes], client: RunClient, poll: float, grace: float) -> int:
    """Supervise the child; a SIGTERM to this pool process (revoke) takes the group down too."""

    def on_term(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        return supervise(proc, lambda: _stop_requested(client), poll, grace)
    finally:
        signal.signal(signal.SIGTERM, previous)
        kill_group(proc)
