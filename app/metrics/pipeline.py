"""What happens to a report batch, in order: metrics -> rollouts (and their signals) ->
diagnostics. The report API and log imports both go through here, so an imported run gets
exactly the treatment of a live one."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.health import service as health
from app.metrics.ingest import ingest, to_points, upsert_points
from app.metrics.names import normalize_row
from app.metrics.schemas import MetricRow
from app.rollouts import service as rollouts
from app.rollouts.schemas import RolloutStep
from app.runs.models import Run

Row = tuple[int, dict[str, float]]


def merge_by_step(*row_lists: Sequence[Row]) -> list[Row]:
    merged: dict[int, dict[str, float]] = {}
    for rows in row_lists:
        for step, metrics in rows:
            merged.setdefault(step, {}).update(metrics)
    return sorted(merged.items())


def _note_names(run: Run, rows: Sequence[MetricRow]) -> None:
    """Keep the run's set of metric names: a new one changes which charts the page draws."""
    known = set(run.metric_names or [])
    seen = {name for r in rows for name in normalize_row(r.metrics)}
    if not seen <= known:
        run.metric_names = sorted(known | seen)


def receive(db: Session, run: Run, rows: Sequence[MetricRow],
            rollout_steps: Sequence[RolloutStep] = (), *, track_progress: bool = True) -> int:
    """Store a batch and re-diagnose; returns the number of metric points stored."""
    if track_progress:
        accepted = ingest(db, run, list(rows))
    else:
        accepted = len(points := to_points(run.id, list(rows)))
        upsert_points(db, points)
    _note_names(run, rows)
    signal_rows = rollouts.store(db, run.id, rollout_steps)
    if signal_rows:
        signal_points = to_points(run.id, [MetricRow(step=s, metrics=m) for s, m in signal_rows])
        upsert_points(db, signal_points)
        accepted += len(signal_points)
        _note_names(run, [MetricRow(step=s, metrics=m) for s, m in signal_rows])
    metric_rows = [(r.step, normalize_row(r.metrics)) for r in rows]
    diag_rows = merge_by_step(metric_rows, signal_rows)
    if diag_rows:
        health.observe(db, run, diag_rows)
    return accepted
