"""The only place that changes a run's status.

Every transition is checked against one explicit table, so a late or duplicated message from a
worker (a retry, a second delivery of the task) can never move a finished run back to life.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from app.core.redact import redact
from app.runs.models import Run

# What a failing run tells every reader: scrubbed of secrets before it is stored.
REDACTED_FIELDS = frozenset({"error", "traceback_tail", "stop_reason"})


class Status(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    IMPORTED = "imported"


TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.IMPORTED})

ALLOWED: dict[Status, frozenset[Status]] = {
    Status.QUEUED: frozenset({Status.RUNNING, Status.CANCELLED, Status.FAILED}),
    Status.RUNNING: frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED}),
    Status.SUCCEEDED: frozenset(),
    Status.FAILED: frozenset(),
    Status.CANCELLED: frozenset(),
    Status.IMPORTED: frozenset(),
}


class TransitionError(Exception):
    """A status change the table forbids; the API answers 409 with this message."""


def _now() -> datetime:
    return datetime.now(UTC)


def transition(run: Run, to: Status, **fields: object) -> None:
    """Move ``run`` to ``to`` and set timestamps; the caller's session commits."""
    current = Status(run.status)
    if to not in ALLOWED[current]:
        raise TransitionError(f"run {run.id} cannot go from {current} to {to}")
    run.status = to
    if to is Status.RUNNING:
        run.started_at = _now()
    if to in TERMINAL:
        run.finished_at = _now()
        # An ended run accepts no more reports; claims stay refused by its status (the ticket's
        # hash is kept so that only its holder learns the run ended, see service.claim).
        run.token_hash = None
    for key, value in fields.items():
        setattr(run, key, redact(value) if key in REDACTED_FIELDS and isinstance(value, str)
                else value)


def request_cancel(run: Run, reason: str = "cancelled by user") -> None:
    """Queued runs end at once; running ones are asked to stop and end when the worker exits."""
    status = Status(run.status)
    if status is Status.QUEUED:
        transition(run, Status.CANCELLED, stop_reason=reason)
    elif status is Status.RUNNING:
        if run.cancel_requested_at is None:
            run.cancel_requested_at = _now()
            run.stop_reason = reason
    else:
        raise TransitionError(f"run {run.id} is {status}; only queued or running runs can stop")


def finish(run: Run, returncode: int, error: str | None, traceback_tail: str | None) -> None:
    """Decide the final status from how the training process ended."""
    if run.cancel_requested_at is not None:
        transition(run, Status.CANCELLED)
    elif returncode == 0 and run.last_step_at is None:  # nothing trained that anyone can see
        transition(run, Status.FAILED, error="training ended without logging a single step",
                   traceback_tail=traceback_tail)
    elif returncode == 0:
        transition(run, Status.SUCCEEDED)
    else:
        transition(run, Status.FAILED, error=error or f"training exited with code {returncode}",
                   traceback_tail=traceback_tail)


def fail(run: Run, error: str, traceback_tail: str | None = None) -> None:
    transition(run, Status.FAILED, error=error, traceback_tail=traceback_tail)


def start(run: Run, pid: int | None, host: str | None) -> None:
    transition(run, Status.RUNNING, worker_pid=pid, worker_host=host)


LIVE_SOURCES = frozenset({"launched", "external"})  # trained while the Deck watched


def reports_live(run: Run) -> bool:
    """A run that trained while reporting here (launched from the Deck, or an outside script
    with DeckCallback): its findings page people and its silence means it was lost. Imports and
    one-shot diagnoses describe the past and page nobody."""
    return run.source in LIVE_SOURCES


def is_live(run: Run) -> bool:
    return Status(run.status) in (Status.QUEUED, Status.RUNNING)
