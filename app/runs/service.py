"""Queries and writes for runs. Functions flush, never commit: the caller owns the transaction."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.db import begin_write
from app.runs import lifecycle
from app.runs.lifecycle import Status
from app.runs.models import Run
from grpodeck.contract.spec import RunSpec


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(run: Run, token: str) -> bool:
    return run.token_hash is not None and hmac.compare_digest(run.token_hash, hash_token(token))


def create_run(db: Session, *, spec: RunSpec, created_by: int | None = None,
               parent_id: int | None = None) -> tuple[Run, str]:
    """Store a queued run and return it with its single-use claim ticket (it travels in the
    task message; the worker trades it for the run's token, see ``claim``)."""
    ticket = secrets.token_urlsafe(32)
    run = Run(
        name=spec.name,
        spec=spec.model_dump(mode="json"),
        status=Status.QUEUED,
        max_steps=spec.max_steps,
        claim_hash=hash_token(ticket),
        created_by_id=created_by,
        parent_id=parent_id,
    )
    db.add(run)
    db.flush()
    return run, ticket


def create_external_run(db: Session, *, name: str, spec: dict[str, Any],
                        created_by: int | None = None) -> tuple[Run, str]:
    """A run some script trains itself: running at once with its run token (no ticket, no
    queue); from here on it reports, stops and ends exactly like a worker's run."""
    token = secrets.token_urlsafe(32)
    max_steps = spec.get("max_steps")
    run = Run(name=name, source="external", spec=spec, status=Status.QUEUED,
              max_steps=max_steps if isinstance(max_steps, int) and max_steps > 0 else 0,
              token_hash=hash_token(token), created_by_id=created_by)
    lifecycle.start(run, None, None)
    run.last_seen_at = run.started_at
    db.add(run)
    db.flush()
    return run, token


# The one answer to a claim whose ticket does not check out, whether or not the run exists: the
# claim route is anonymous, so it must not tell a stranger which run ids are real.
CLAIM_REFUSED = "no queued run takes this claim ticket"


class ClaimRefused(Exception):
    """The ticket is wrong (``unauthorised``) or already spent / the run is no longer queued."""

    def __init__(self, message: str, *, unauthorised: bool = False) -> None:
        super().__init__(message)
        self.unauthorised = unauthorised


def check_claimable(run: Run, ticket: str) -> str:
    """Raise ``ClaimRefused`` unless ``ticket`` could claim ``run`` now; returns the ticket's
    hash. Also asked on its own, spending nothing: a worker waiting for a free device slot
    asks it before and while it waits, so that a run cancelled meanwhile, or a redelivered task
    of a run another worker already trains, does not hold a pool process until a slot frees."""
    ticket_hash = hash_token(ticket)
    if run.claim_hash is None or not hmac.compare_digest(run.claim_hash, ticket_hash):
        raise ClaimRefused(CLAIM_REFUSED, unauthorised=True)
    if run.status != Status.QUEUED or run.token_hash is not None:
        raise ClaimRefused(f"run {run.id} is {run.status} and already claimed or ended")
    return ticket_hash


def claim(db: Session, run: Run, ticket: str, pid: int | None, host: str | None) -> str:
    """Trade the ticket for a fresh run token and start the run; only one claim can succeed.

    The conditional UPDATE is the guard: two workers holding the same (redelivered) message race
    on it, and the database lets exactly one of them clear the ticket. The token never exists in
    the broker, only in this reply and as a hash here; it is revoked when the run ends."""
    ticket_hash = check_claimable(run, ticket)
    token = secrets.token_urlsafe(32)
    # The ticket's hash stays (only its holder may learn that the run was claimed or ended);
    # the guard that makes it single-use is the status and the unset token.
    won = db.execute(update(Run).where(Run.id == run.id, Run.claim_hash == ticket_hash,
                                       Run.status == Status.QUEUED, Run.token_hash.is_(None))
                     .values(token_hash=hash_token(token))
                     .execution_options(synchronize_session=False)).rowcount
    if won != 1:
        raise ClaimRefused(f"run {run.id} was claimed by another worker")
    db.refresh(run)
    run.marker_key = secrets.token_hex(32)  # for the supervisor only (log_markers)
    lifecycle.start(run, pid, host)
    run.last_seen_at = run.started_at
    return token


def seen(run: Run, now: datetime | None = None, every_s: float = 5.0) -> None:
    """Note that the run's worker is alive; written at most every ``every_s`` seconds."""
    now = now or datetime.now(UTC)
    last = run.last_seen_at
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=UTC)
    if last is None or now - last >= timedelta(seconds=every_s):
        run.last_seen_at = now


def create_imported_run(db: Session, *, name: str, spec: dict, max_step: int) -> Run:
    run = Run(name=name, source="imported", spec=spec, status=Status.IMPORTED,
              max_steps=max_step, current_step=max_step)
    db.add(run)
    db.flush()
    return run


def storable_id(run_id: int) -> bool:
    """An id an integer column can hold (2**70 in a URL is a 404, not a database error)."""
    return 0 < run_id < 2**31


def get_run(db: Session, run_id: int) -> Run | None:
    return db.get(Run, run_id) if storable_id(run_id) else None


def get_run_for_update(db: Session, run_id: int) -> Run | None:
    """The run, read inside a write transaction that holds it until commit: a report batch and
    the lost-run watcher both rewrite its progress and diagnostics state from what they read,
    so two of them at once must not interleave (one would undo the other)."""
    if not storable_id(run_id):
        return None
    begin_write(db)
    return db.get(Run, run_id, with_for_update=True, populate_existing=True)


def list_runs(db: Session, *, limit: int = 200) -> Sequence[Run]:
    return db.scalars(select(Run).order_by(Run.id.desc()).limit(limit)).all()
