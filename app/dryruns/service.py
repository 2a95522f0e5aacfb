"""Store dry runs, queue them, and take their results back from the worker."""

from __future__ import annotations

import hmac
import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.core.redact import redact
from app.dryruns import analysis, sender
from app.dryruns.models import DryRun
from app.runs.service import hash_token, storable_id
from grpodeck.contract.spec import RunSpec

log = logging.getLogger(__name__)


def start(db: Session, spec: RunSpec, prompts: int, created_by: int | None) -> DryRun:
    """Commit the dry run, then queue it; a broker that is down fails it visibly. Callers pass
    the launch gate first (``app.launch.launch.start_dry_run``): "Launch" on its page would
    launch the spec as it is."""
    ticket = secrets.token_urlsafe(32)
    dry = DryRun(spec=spec.model_dump(mode="json"), status="queued",
                 ticket_hash=hash_token(ticket), created_by_id=created_by)
    db.add(dry)
    db.commit()
    try:
        sender.send(dry.id, dry.spec, ticket, prompts)
    except Exception as exc:
        log.exception("could not queue dry run %s", dry.id)
        finish(dry, {"error": f"could not queue the dry run: {exc}"})
        db.commit()
    return dry


def get(db: Session, dry_run_id: int) -> DryRun | None:
    return db.get(DryRun, dry_run_id) if storable_id(dry_run_id) else None


def finish(dry: DryRun, raw: dict[str, Any]) -> None:
    """Store the worker's result; its error (a reward's traceback) is redacted first: the
    dry-run page shows it to every reader."""
    if isinstance(raw.get("error"), str):
        raw = {**raw, "error": redact(raw["error"])}
    dry.result = analysis.analyse(raw)
    dry.error = raw.get("error")
    dry.status = "failed" if dry.error else "done"
    dry.ticket_hash = None
    dry.finished_at = datetime.now(UTC)


def _ticket_matches(dry: DryRun, ticket: str) -> bool:
    return dry.ticket_hash is not None and hmac.compare_digest(dry.ticket_hash, hash_token(ticket))


def mark_alive(dry: DryRun, ticket: str, worker: str | None) -> bool:
    """The worker started (or still samples) this dry run: record when, and which worker.
    False when the ticket is wrong or spent: the dry run is over (answered, or failed as lost),
    and a redelivered message must not sample it again."""
    if dry.status != "queued" or not _ticket_matches(dry, ticket):
        return False
    now = datetime.now(UTC)
    dry.started_at = dry.started_at or now
    dry.last_seen_at = now
    if worker:
        dry.worker = worker
    return True


def accept_result(db: Session, dry: DryRun, ticket: str, raw: dict[str, Any]) -> bool:
    """Store the worker's result once: the ticket is spent by a conditional UPDATE, so a
    redelivered task posting again is refused. False when the ticket is wrong or spent."""
    if not _ticket_matches(dry, ticket):
        return False
    return _spend_and_finish(db, dry, hash_token(ticket), raw)


def fail_unanswered(db: Session, dry: DryRun, reason: str) -> bool:
    """Fail ``dry`` with ``reason`` unless its result arrived meanwhile (the same conditional
    spend of the ticket as ``accept_result``: whichever commits first wins, once)."""
    if dry.ticket_hash is None:
        return False
    return _spend_and_finish(db, dry, dry.ticket_hash, {"error": reason})


def _spend_and_finish(db: Session, dry: DryRun, ticket_hash: str, raw: dict[str, Any]) -> bool:
    won = db.execute(update(DryRun).where(DryRun.id == dry.id,
                                          DryRun.ticket_hash == ticket_hash)
                     .values(ticket_hash=None)
                     .execution_options(synchronize_session=False)).rowcount
    if won != 1:
        return False
    db.refresh(dry)
    finish(dry, raw)
    return True
