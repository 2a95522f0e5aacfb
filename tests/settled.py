"""Tests that read the settled points or ``metric_rollups`` directly first settle the runs, as
the background settler (``app/metrics/settler.py``) would have by then: ``rollups.catch_up``
spreads the runs' inbox (``app/metrics/inbox.py``)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.metrics import rollups, store
from app.metrics.models import MetricChunk, MetricKey
from app.runs.models import Run


def settle(db: Session, run_ids: Iterable[int]) -> None:
    """Spread each run's received steps into its points and summaries, and commit."""
    for run_id in run_ids:
        run = db.get(Run, run_id)
        if run is not None:
            rollups.catch_up(db, run)


def stored_points(db: Session, run_id: int | None = None
                  ) -> dict[tuple[int, str], tuple[float | None, str | None]]:
    """Every settled point of the run (all runs without ``run_id``) by (step, name), as
    (value, raw): a NaN/inf as (None, its text), the way the API writes it."""
    runs = [run_id] if run_id is not None else db.scalars(
        select(MetricChunk.run_id).distinct()).all()
    out: dict[tuple[int, str], tuple[float | None, str | None]] = {}
    for rid in runs:
        for name, (steps, values) in store.read(db, rid).items():
            for step, value in zip(steps.tolist(), values.tolist(), strict=True):
                out[(step, name)] = (value, None) if math.isfinite(value) else (None, repr(value))
    return out


def point_count(db: Session, run_id: int | None = None, name: str | None = None) -> int:
    """Settled points stored (of one run, of one metric)."""
    stmt = select(func.coalesce(func.sum(MetricChunk.n), 0))
    if run_id is not None:
        stmt = stmt.where(MetricChunk.run_id == run_id)
    if name is not None:
        stmt = stmt.join(MetricKey, MetricKey.id == MetricChunk.metric_id).where(
            MetricKey.name == name)
    return int(db.scalar(stmt) or 0)


def add_points(db: Session, run_id: int, points: Iterable[tuple[str, int, float]]) -> None:
    """Store (name, step, value) points straight into the run's chunks, as the settler would
    (no summaries: a test that needs them writes them)."""
    by_name: dict[str, dict[int, float]] = {}
    for name, step, value in points:
        by_name.setdefault(name, {})[step] = value
    store.write(db, run_id, {name: (np.array(sorted(values), np.int64),
                                    np.array([values[s] for s in sorted(values)], np.float64))
                             for name, values in by_name.items()})
