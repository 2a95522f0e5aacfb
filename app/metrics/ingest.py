"""The one way metrics enter the database: idempotent by (run, step, name).

A worker that retries a batch, or re-sends a step after a network hiccup, overwrites the same
values instead of duplicating them. A batch is stored as one inbox row per step
(``app/metrics/inbox.py``); ``rollups.settle`` spreads the inbox into per-metric points and
their chart summaries before anything reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.metrics import inbox, rollups
from app.metrics.names import Row
from app.runs.models import Run
from app.runs.progress import evaluating_within


def store(db: Session, run: Run, rows: Sequence[Row]) -> int:
    """Store normalised rows as received and mark their steps for ``rollups.settle``; returns
    the values stored. The caller holds the run's write lock and commits."""
    stored = inbox.write(db, run.id, rows)
    if stored:
        steps = [step for step, metrics in rows if metrics]
        rollups.note_stale(run, min(steps), max(steps))
    return stored


def _update_progress(run: Run, max_step: int, now: datetime) -> None:
    """Keep step, last report time and a smoothed seconds-per-step for ETA and 'lost' checks;
    time spent evaluating between two reports is no step's (``evaluating_within``)."""
    previous_step, previous_at = run.current_step, run.last_step_at
    if max_step > previous_step and previous_at is not None:
        if previous_at.tzinfo is None:
            previous_at = previous_at.replace(tzinfo=UTC)
        trained = (now - previous_at).total_seconds() - evaluating_within(run, previous_at, now)
        per_step = max(0.0, trained) / (max_step - previous_step)
        old = run.seconds_per_step
        run.seconds_per_step = per_step if old is None else 0.7 * old + 0.3 * per_step
    if max_step > previous_step:
        run.last_step_at = now
    run.current_step = max(previous_step, max_step)


def ingest(db: Session, run: Run, rows: Sequence[Row]) -> int:
    """Store normalised rows and advance the run's progress; returns the points stored."""
    stored = store(db, run, rows)
    now = datetime.now(UTC)
    if rows:
        _update_progress(run, max(step for step, _ in rows), now)
    run.last_report_at = now
    return stored

