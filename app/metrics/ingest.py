"""The one way metrics enter the database: idempotent by (run, step, name).

A worker that retries a batch, or re-sends a step after a network hiccup, overwrites the same
points instead of duplicating them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.metrics.models import MetricPoint
from app.metrics.names import Row
from app.runs.models import Run


def _point(run_id: int, step: int, name: str, value: float) -> dict[str, object]:
    finite = math.isfinite(value)
    return {"run_id": run_id, "step": step, "name": name[:200],
            "value": value if finite else None, "raw": None if finite else repr(value)}


def to_points(run_id: int, rows: Sequence[Row]) -> list[dict[str, object]]:
    """Flatten normalised rows (``names.normalize_row``) to point dicts; a later row for the
    same (step, name) wins."""
    merged: dict[tuple[int, str], dict[str, object]] = {}
    for step, metrics in rows:
        for name, value in metrics.items():
            merged[(step, name)] = _point(run_id, step, name, value)
    return list(merged.values())


def upsert_points(db: Session, points: list[dict[str, object]]) -> None:
    """One parameterised upsert executed for many rows: SQLAlchemy batches it into multi-row
    statements ("insertmanyvalues") without compiling a new statement per batch."""
    if not points:
        return
    insert = pg_insert if db.get_bind().dialect.name == "postgresql" else sqlite_insert
    stmt = insert(MetricPoint)
    stmt = stmt.on_conflict_do_update(
        index_elements=["run_id", "name", "step"],
        set_={"value": stmt.excluded.value, "raw": stmt.excluded.raw},
    )
    db.execute(stmt, points)


def _update_progress(run: Run, max_step: int, now: datetime) -> None:
    """Keep step, last report time and a smoothed seconds-per-step for ETA and 'lost' checks."""
    previous_step, previous_at = run.current_step, run.last_step_at
    if max_step > previous_step and previous_at is not None:
        if previous_at.tzinfo is None:
            previous_at = previous_at.replace(tzinfo=UTC)
        per_step = (now - previous_at).total_seconds() / (max_step - previous_step)
        old = run.seconds_per_step
        run.seconds_per_step = per_step if old is None else 0.7 * old + 0.3 * per_step
    if max_step > previous_step:
        run.last_step_at = now
    run.current_step = max(previous_step, max_step)


def ingest(db: Session, run: Run, rows: Sequence[Row]) -> int:
    """Store normalised rows and advance the run's progress; returns the points stored."""
    points = to_points(run.id, rows)
    upsert_points(db, points)
    now = datetime.now(UTC)
    if rows:
        _update_progress(run, max(step for step, _ in rows), now)
    run.last_report_at = now
    return len(points)

