"""Dry runs whose worker vanished: failed with the reason, never left "queued" forever.

Why a check of its own: a dry run is no run (no claim, no reports), so the lost-run check never
saw it; on the embedded broker nothing redelivers a message whose consumer was killed, and on
Redis a redelivery comes only after the visibility timeout. The worker posts ``.../alive`` when
it starts a dry run and every ``heartbeat_seconds`` while its sampling child runs; a started dry
run silent for ``lost_after_seconds`` is failed here (the scheduler calls this with the runs'
check). The failure spends the ticket, so a message redelivered later is refused at its first
``alive`` and samples nothing. A dry run no worker has started yet keeps waiting: the banner
says when no worker is running.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy import select

from app.core.config import get_settings
from app.core.db import get_sessionmaker
from app.dryruns import service
from app.dryruns.models import DryRun

log = logging.getLogger(__name__)


def _aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes (stored in UTC)."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def lost_reason(dry: DryRun, now: datetime, since: datetime | None, limit: float) -> str | None:
    """Why ``dry`` counts as lost at ``now``, or None. Silence while the web app was down
    (before ``since``) is not held against the worker: its pings could not arrive."""
    seen = [t for t in (_aware(dry.last_seen_at), _aware(dry.started_at), since) if t is not None]
    if dry.started_at is None or not seen:
        return None
    silent = (now - max(seen)).total_seconds()
    if silent <= limit:
        return None
    who = f"worker {dry.worker}" if dry.worker else "its worker"
    return (f"worker lost: {who} gave no sign of life for {silent:.0f} s (limit {limit:.0f} s) "
            "while sampling; it was stopped, killed or lost its connection. Start the dry run "
            "again.")


def check_dry_runs(now: datetime | None = None, since: datetime | None = None) -> int:
    """Fail every started, unanswered dry run whose worker went silent; returns how many."""
    now = now or datetime.now(UTC)
    limit = get_settings().lost_after_seconds
    failed = 0
    with get_sessionmaker()() as db:
        started = db.scalars(select(DryRun).where(DryRun.status == "queued",
                                                  DryRun.started_at.is_not(None))).all()
        for dry in started:
            reason = lost_reason(dry, now, since, limit)
            if reason is not None and service.fail_unanswered(db, dry, reason):
                log.warning("dry run %s: %s", dry.id, reason)
                db.commit()
                failed += 1
        db.commit()
    return failed
