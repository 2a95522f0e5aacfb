"""Background service: ends live runs whose worker went silent (settings: lost_check_seconds,
lost_after_seconds).

Ingest only runs when a worker reports, so silence must be noticed by someone else. A running
run's last sign of life is the latest of its claim, its supervisor's control polls (every second
while the child trains), and its metric reports. Silence longer than ``lost_after_seconds``, or
3x the run's usual report interval when that is longer, fails the run as "worker lost"; this
covers runs that never sent a metric. A run whose `lost` finding turns critical is failed too.
Silence while this web process itself was down is not held against anyone: it is measured from
the watcher's start at the earliest.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from sqlalchemy import select

from app.alerts import service as alerts
from app.core.config import get_settings
from app.core.db import get_sessionmaker
from app.diagnostics.detectors.lost import MIN_GAP_S
from app.ingest import pipeline
from app.runs import lifecycle
from app.runs.models import Run
from app.runs.service import get_run_for_update

log = logging.getLogger(__name__)

REPORT_INTERVALS = 3.0  # silence of this many usual report intervals means the worker is gone
# The `lost` finding measures silence from the last metric report; right after this web process
# (re)started, reports held back by an outage are still on their way, so it fails nothing yet.
FINDING_SETTLE_S = 5 * MIN_GAP_S


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def last_sign_of_life(run: Run, since: datetime | None = None) -> datetime | None:
    seen = [_aware(t) for t in (run.last_seen_at, run.last_report_at, run.started_at, since)]
    return max((t for t in seen if t is not None), default=None)


def silence_limit(run: Run, floor: float) -> float:
    """``floor`` seconds, or 3x the usual time between reports when a run is slower than that."""
    every = int((run.spec or {}).get("logging_steps") or 1)
    usual = (run.seconds_per_step or 0.0) * every
    return max(floor, REPORT_INTERVALS * usual)


def _worker_lost(run: Run, now: datetime, since: datetime | None, floor: float) -> str | None:
    last = last_sign_of_life(run, since)
    if last is None:
        return None
    silent = (now - last).total_seconds()
    limit = silence_limit(run, floor)
    if silent <= limit:
        return None
    return (f"lost: worker lost, no sign of life for {silent:.0f} s (limit {limit:.0f} s) "
            f"at step {run.current_step}")


def check_live_runs(now: datetime | None = None, since: datetime | None = None) -> int:
    """Fail every running run whose worker is lost; returns how many were failed.

    One short transaction per run, the run locked as ingest locks it, so the check never
    overwrites a report batch's progress or diagnostics state."""
    now = now or datetime.now(UTC)
    floor = get_settings().lost_after_seconds
    settled = since is None or (now - since).total_seconds() >= FINDING_SETTLE_S
    failed = 0
    with get_sessionmaker()() as db:
        run_ids = db.scalars(select(Run.id).where(Run.status == lifecycle.Status.RUNNING)).all()
    for run_id in run_ids:
        with get_sessionmaker()() as db:
            run = get_run_for_update(db, run_id)
            if run is None or run.status != lifecycle.Status.RUNNING:
                continue
            reason = _worker_lost(run, now, since, floor)
            if reason is None and settled:
                diagnosis = pipeline.observe(db, run, [], now)
                lost = [f for f in diagnosis.findings if f.category == "lost"]
                if lost and lost[0].severity == "critical":
                    reason = f"lost: {lost[0].summary}"
            if reason is not None:
                log.warning("run %s: %s", run.id, reason)
                lifecycle.fail(run, reason)
                alerts.run_lost(db, run, reason, now)
                failed += 1
            db.commit()
    return failed


async def watch_forever() -> None:
    interval = get_settings().lost_check_seconds
    since = datetime.now(UTC)
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(check_live_runs, None, since)
        except Exception:  # the watcher must survive a database hiccup
            log.exception("lost-run check failed")
