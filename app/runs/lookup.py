"""``run_or_404``: how every route turns a run id from its URL into the run, or a 404.

Here, beside the record, rather than in any one API: the pages and APIs of rollouts, logs,
artifacts, findings and the run itself all find their run this one way."""

from __future__ import annotations

from fastapi import HTTPException, status

from app.core.db import SessionDep
from app.runs import service
from app.runs.models import Run


def run_or_404(db: SessionDep, run_id: int) -> Run:
    run = service.get_run(db, run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    return run
