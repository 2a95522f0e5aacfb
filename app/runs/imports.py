"""Store a training log made elsewhere (trainer_state.json, JSON/JSONL rows, console log) as an
imported run, with the same charts and findings as a launched one."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from app.importers import load_log
from app.metrics import pipeline
from app.metrics.schemas import MetricRow
from app.runs import service
from app.runs.models import Run


def import_log(db: Session, path: Path, name: str | None = None,
               source_name: str | None = None) -> Run:
    """Raises app.importers.LogFormatError (nothing stored) when the file can't be read.

    ``source_name`` is the file's original name when ``path`` is an upload's temporary copy.
    """
    log = load_log(path)
    last_step = log.rows[-1][0]
    spec = {"source_file": source_name or path.name, "source_format": log.source_format,
            **{k: v for k, v in log.meta.items() if isinstance(v, int | float | str)}}
    run = service.create_imported_run(db, name=name or path.name, spec=spec, max_step=last_step)
    rows = [MetricRow(step=step, metrics=metrics) for step, metrics in log.rows]
    pipeline.receive(db, run, rows, track_progress=False)
    return run
