"""Background service: finds live runs that stopped reporting (setting: lost_check_seconds).

Ingest only runs when a worker reports, so silence must be noticed by someone else. A run whose
`lost` finding turns critical is failed: a crashed worker must never leave a run 'running'.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from sqlalchemy import select

from app.alerts import service as alerts
from app.core.config import get_settings
from app.core.db import get_sessionmaker
from app.health import service
from app.runs import lifecycle
from app.runs.models import Run

log = logging.getLogger(__name__)


def check_live_runs(now: datetime | None = None) -> int:
    """Re-diagnose every running run with the current time; returns how many were failed."""
    now = now or datetime.now(UTC)
    failed = 0
    with get_sessionmaker()() as db:
        for run in db.scalars(select(Run).where(Run.status == lifecycle.Status.RUNNING)).all():
            diagnosis = service.observe(db, run, [], now)
            lost = [f for f in diagnosis.findings if f.category == "lost"]
            if lost and lost[0].severity == "critical":
                lifecycle.fail(run, f"lost: {lost[0].summary}")
                alerts.run_lost(db, run, f"lost: {lost[0].summary}", now)
                failed += 1
        db.commit()
    return failed


async def watch_forever() -> None:
    interval = get_settings().lost_check_seconds
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(check_live_runs)
        except Exception:  # the watcher must survive a database hiccup
            log.exception("lost-run check failed")
