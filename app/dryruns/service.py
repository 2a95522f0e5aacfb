"""Store dry runs, queue them, and take their results back from the worker."""

from __future__ import annotations

import hmac
import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.dryruns import analysis, sender
from app.dryruns.models import DryRun
from app.runs.service import hash_token, storable_id
from grpodeck.contract.spec import RunSpec

log = logging.getLogger(__name__)


def start(db: Session, spec: RunSpec, prompts: int, created_by: int | None) -> DryRun:
    """Commit the dry run, then queue it; a broker that is down fails it visibly."""
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
    dry.result = analysis.analyse(raw)
    dry.error = raw.get("error")
    dry.status = "failed" if dry.error else "done"
    dry.ticket_hash = None
    dry.finished_at = datetime.now(UTC)


def accept_result(db: Session, dry: DryRun, ticket: str, raw: dict[str, Any]) -> bool:
    """Store the worker's result once: the ticket is spent by a conditional UPDATE, so a
    redelivered task posting again is refused. False when the ticket is wrong or spent."""
    if dry.ticket_hash is None or not hmac.compare_digest(dry.ticket_hash, hash_token(ticket)):
        return False
    won = db.execute(update(DryRun).where(DryRun.id == dry.id,
                                          DryRun.ticket_hash == hash_token(ticket))
                     .values(ticket_hash=None)
                     .execution_options(synchronize_session=False)).rowcount
    if won != 1:
        return False
    db.refresh(dry)
    finish(dry, raw)
    return True
