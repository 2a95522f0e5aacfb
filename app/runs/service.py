"""Queries and writes for runs. Functions flush, never commit: the caller owns the transaction."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db import begin_write
from app.runs.lifecycle import Status
from app.runs.models import Run
from app.runs.spec import RunSpec


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(run: Run, token: str) -> bool:
    return run.token_hash is not None and hmac.compare_digest(run.token_hash, hash_token(token))


def create_run(db: Session, *, spec: RunSpec, created_by: int | None = None) -> tuple[Run, str]:
    """Store a queued run and return it with its reporting token (shown to no one but the worker)."""
    token = secrets.token_urlsafe(32)
    run = Run(
        name=spec.name,
        spec=spec.model_dump(mode="json"),
        status=Status.QUEUED,
        max_steps=spec.max_steps,
        token_hash=hash_token(token),
        created_by_id=created_by,
    )
    db.add(run)
    db.flush()
    return run, token


def create_imported_run(db: Session, *, name: str, spec: dict, max_step: int) -> Run:
    run = Run(name=name, source="imported", spec=spec, status=Status.IMPORTED,
              max_steps=max_step, current_step=max_step)
    db.add(run)
    db.flush()
    return run


def delete_run(db: Session, run: Run) -> None:
    """Remove a finished run; its metrics, findings and rollouts go with it (ON DELETE CASCADE)."""
    db.delete(run)
    db.flush()


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
