"""Tests that read ``metric_points`` or ``metric_rollups`` directly first settle the runs, as
the background settler (``app/metrics/settler.py``) would have by then: ``rollups.catch_up``
spreads the runs' inbox (``app/metrics/inbox.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from app.metrics import rollups
from app.runs.models import Run


def settle(db: Session, run_ids: Iterable[int]) -> None:
    """Spread each run's received steps into its points and summaries, and commit."""
    for run_id in run_ids:
        run = db.get(Run, run_id)
        if run is not None:
            rollups.catch_up(db, run)
