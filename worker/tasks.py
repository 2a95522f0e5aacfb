"""Thin Celery tasks: claim the run, start the training child, deliver what it left, report the end.

The task message holds a single-use claim ticket, never the run's token: the claim trades it for
the token, which reaches the child only through its environment. The child dies with this
process (``worker.training.lifeline``), so a ``kill -9`` of the worker leaves no orphan training;
the run is then ended by the server's lost check. After the child exits, rows and captured
rollouts it could not deliver (an outage at the end of the run) are replayed from its spools
before the end is reported.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from celery import Task

from grpodeck.client import spool
from grpodeck.contract.log_markers import (
    MARKERS_ENV,
    MARKERS_FILE,
    PREAMBLE_END,
    preamble_lines,
    slot_line,
)
from grpodeck.contract.tasks import TRAIN_RUN
from worker.artifacts import upload_saved
from worker.celery_app import celery_app
from worker.log_shipper import LogShipper
from worker.run_client import RunClient, RunConflict, retryable
from worker.settings import get_settings
from worker.slots import NotWanted, Slot, slot_env, take_slot, worker_slots
from worker.supervise import Child, error_line, kill_group, redact_paths, supervise, tail
from worker.training import child as training_child
from worker.training import warm
from worker.training.child import SUPERVISOR_ENV, TOKEN_ENV
from worker.training.environment import QUIET_INTEGRATIONS
from worker.training.multi import multi_process_command
from worker.training.ranks import first_failure

log = logging.getLogger(__name__)

REPLAY_CHUNK = 500
ROLLOUT_REPLAY_CHUNK = 10  # captured steps per POST (~0.3 MB each by default; 8 MB allowed)
CLAIM_RETRY_SECONDS = 30


def _child_args(run_id: int, spec_path: str, report_url: str, output_dir: str,
                report_deadline: float) -> list[str]:
    """The training child's arguments (``python -m worker.training.child ARGS``)."""
    return ["--spec", spec_path, "--run-id", str(run_id), "--report-url", report_url,
            "--output-dir", output_dir, "--report-deadline", str(report_deadline)]


def child_env(token: str, out: Path, slot: Slot | None) -> dict[str, str]:
    """The training child's environment: the run token travels here, never on the command line
    (a process listing shows it); the log-marker key never reaches the child, only the path of
    the markers file it writes."""
    return {**os.environ, **QUIET_INTEGRATIONS, TOKEN_ENV: token,
            SUPERVISOR_ENV: str(os.getpid()), MARKERS_ENV: str(out / MARKERS_FILE),
            **slot_env(slot)}


@celery_app.task(name=TRAIN_RUN, bind=True, max_retries=None)
def train_run(self: Task, run_id: int, spec: dict[str, Any], report_url: str,
              ticket: str) -> int | None:
    """Take a free device slot (when this worker has slots) before claiming, so a run waiting
    for GPUs stays queued on the dashboard; then claim and train in it. While it waits, it
    asks whether the run is still to be trained, and stops waiting once it is not."""
    slots = worker_slots()
    if not slots:
        return _claim_and_train(self, run_id, spec, report_url, ticket, None)
    settings = get_settings()
    asking = RunClient(report_url, run_id)
    try:
        with take_slot(slots, settings.device_locks_dir, on_wait=lambda: log.info(
                "run %s waits for a free device slot", run_id),
                still_wanted=lambda: asking.claimable(ticket),
                recheck_seconds=settings.slot_recheck_seconds) as slot:
            asking.close()  # done asking: not held open for the hours the run trains
            return _claim_and_train(self, run_id, spec, report_url, ticket, slot)
    except NotWanted:
        log.info("run %s not started: no longer waits for a device slot (cancelled, or "
                 "claimed by another worker)", run_id)
        return None
    finally:
        asking.close()


def _claim_and_train(self: Task, run_id: int, spec: dict[str, Any], report_url: str,
                     ticket: str, slot: Slot | None) -> int | None:
    settings = get_settings()
    client = RunClient(report_url, run_id, deadline=settings.report_deadline_seconds)
    try:
        token = client.claim(ticket, pid=os.getpid(), host=socket.gethostname())
    except RunConflict as exc:  # cancelled while queued, or a redelivery of a claimed run
        log.info("run %s not started: %s", run_id, exc)
        client.close()
        return None
    except Exception as exc:
        if not retryable(exc):
            raise
        client.close()  # the web app is unreachable: put the run back in the queue for later
        raise self.retry(exc=exc, countdown=CLAIM_RETRY_SECONDS) from exc
    try:
        return _train_claimed(client, run_id, spec, report_url, token, slot)
    finally:
        client.close()


def _train_claimed(client: RunClient, run_id: int, spec: dict[str, Any], report_url: str,
                   token: str, slot: Slot | None = None) -> int:
    settings = get_settings()
    out = settings.runs_dir / str(run_id)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec.json").write_text(json.dumps(spec))
    for stale in (out / "metrics.jsonl", out / "metrics.jsonl.acked", out / MARKERS_FILE):
        stale.unlink(missing_ok=True)
    env = child_env(token, out, slot)
    stderr_path = out / "stderr.log"
    args = _child_args(run_id, str(out / "spec.json"), report_url, str(out),
                       settings.report_deadline_seconds)
    command = [sys.executable, "-m", training_child.__name__, *args]
    with (out / "stdout.log").open("wb") as stdout, stderr_path.open("wb") as stderr:
        if slot is not None:  # the run's Logs tab says which devices it trains on
            stdout.write(slot_line(slot.index, slot.visible).encode())
            stdout.flush()
        try:
            launched = multi_process_command(spec, out, command, stdout)
        except ValueError as exc:  # this worker cannot start it on its devices
            return _refused(client, run_id, str(exc))
        vouch_preamble(out)
        shipper = LogShipper(client, out)
        shipper.ship()  # the vouched preamble is on the server before the child can write
        warm_args = args if launched is command and _may_fork(client, shipper) else None
        proc = _start_child(launched, warm_args, env, stdout, stderr)
        rc = _wait(proc, client, settings.control_poll_seconds, settings.cancel_grace_seconds,
                   shipper)
    shipper.drain()
    upload_saved(client, out)
    err_tail, err = failure(out, stderr_path) if rc else (None, None)
    try:
        replay_all(client, out)
        client.finished(rc, err, err_tail)
    except RunConflict as exc:  # ended on the server meanwhile (lost, or cancelled and gone)
        log.warning("run %s: the server no longer takes its reports: %s", run_id, exc)
    return rc


def vouch_preamble(out: Path) -> None:
    """Write what this supervisor put at the start of stdout (its slot and launch lines) to the
    run's markers file, closed by ``PREAMBLE_END``, before the child starts: the shipper signs
    it, and the Devices panel believes only that (issue 55), never stdout, where the child's
    own first line may pose as one."""
    with (out / "stdout.log").open("rb") as fh:
        opening = fh.read(4096).decode("utf-8", "replace")
    (out / MARKERS_FILE).write_text(preamble_lines(opening) + PREAMBLE_END)


def _may_fork(client: RunClient, shipper: LogShipper) -> bool:
    """Whether this pool process can fork the run's child warm (``worker.training.warm``): it
    may and can, and has the training stack imported (its first run imports it here, polling
    the server meanwhile as supervising does)."""
    return warm.ready(lambda: _poll(client, shipper), get_settings().control_poll_seconds)


def _start_child(command: list[str], child_args: list[str] | None, env: dict[str, str],
                 stdout: IO[bytes], stderr: IO[bytes]) -> Child:
    """A run on one process is forked, with ``child_args``, from this pool process that has
    the training stack imported; a launcher for many devices, or a worker that cannot or may
    not fork, starts ``command``: a fresh interpreter."""
    if child_args is not None:
        return warm.fork_child(training_child.main, child_args, env, stdout, stderr,
                               program=training_child.__file__, title=command)
    return subprocess.Popen(command, stdout=stdout, stderr=stderr, start_new_session=True,
                            env=env)


def _refused(client: RunClient, run_id: int, reason: str) -> int:
    """End a run this worker cannot start, saying why (the form's check with no report)."""
    try:
        client.finished(1, reason, None)
    except RunConflict as exc:
        log.warning("run %s: the server no longer takes its reports: %s", run_id, exc)
    return 1


def failure(out: Path, stderr_path: Path) -> tuple[str, str | None]:
    """(traceback tail, error line) of a failed run: the first rank that failed (a run on many
    devices, ``worker.training.ranks``), else the stderr tail."""
    first = first_failure(out)
    if first is not None:
        rank, text = first
        err_tail = redact_paths(text[-4000:])
        line = error_line(err_tail)
        return err_tail, f"rank {rank}: {line}" if line else f"rank {rank} failed"
    err_tail = redact_paths(tail(stderr_path))
    return err_tail, error_line(err_tail)


def replay(client: RunClient, spool_path: Path, rollouts: bool = False) -> int:
    """Deliver the spool's unacknowledged rows (idempotent on the server); returns how many.
    ``rollouts``: the spool holds captured steps (``rollouts.jsonl``), sent a few per POST."""
    items = spool.unacked(spool_path)
    what = "captured rollout steps" if rollouts else "metric rows"
    if items:
        log.warning("run %s: replaying %d undelivered %s", client.run_id, len(items), what)
    done = spool.acked(spool_path)
    size = ROLLOUT_REPLAY_CHUNK if rollouts else REPLAY_CHUNK
    send = client.report_rollouts if rollouts else client.report
    for i in range(0, len(items), size):
        chunk = items[i:i + size]
        send(chunk)
        done += len(chunk)
        spool.mark_acked(spool_path, done)
    return len(items)


def replay_all(client: RunClient, out: Path) -> int:
    """What the child spooled and never delivered: its rows, then its captured rollouts
    (``grpodeck.client.sender`` spools both next to each other)."""
    return replay(client, out / "metrics.jsonl") + replay(client, out / "rollouts.jsonl",
                                                          rollouts=True)


def _stop_requested(client: RunClient) -> bool:
    """An unreachable web app is not a stop request: keep training, the next poll may succeed.
    A run the server says is over (ended, lost, token revoked) is a stop request."""
    try:
        return client.control().stop
    except RunConflict as exc:
        log.warning("run %s: the server ended this run: %s", client.run_id, exc)
        return True
    except Exception as exc:  # noqa: BLE001 - any failure to ask means "no answer"
        log.warning("run %s: control poll failed: %s", client.run_id, exc)
        return False


def _poll(client: RunClient, shipper: LogShipper) -> bool:
    """Each supervision tick: send the child's new output, then ask whether to stop."""
    shipper.ship()
    return _stop_requested(client)


def _wait(proc: Child, client: RunClient, poll: float, grace: float,
          shipper: LogShipper) -> int:
    """Supervise the child, shipping its output at each poll; a SIGTERM to this pool process
    (revoke) takes the group down too."""

    def on_term(signum: int, _frame: object) -> None:
        # the stop is under way: a second SIGTERM (the worker's shutdown forwards one after
        # the group's) must not cut the child's grace short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        return supervise(proc, lambda: _poll(client, shipper), poll, grace)
    finally:
        kill_group(proc, grace)
        signal.signal(signal.SIGTERM, previous)
