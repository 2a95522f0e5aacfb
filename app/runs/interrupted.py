"""End the runs a stopped `grpodeck up` was training (issue 55).

Why here and at once: stopping ``up`` (SIGTERM, Ctrl-C) stops its worker, whose training child
ends without a final report (and the web app stops with it), so the run stayed ``running`` until
the lost-run check of the *next* start failed it minutes later, as "worker lost". ``up`` knows
which processes were its worker, so once they have exited it ends their runs itself, saying why.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from sqlalchemy import select

from app.core.db import get_sessionmaker
from app.runs import lifecycle
from app.runs.models import Run
from app.runs.service import get_run_for_update

log = logging.getLogger("grpodeck.up")

STOPPED = "the Deck was stopped while this run was running"


def _end(run: Run) -> None:
    """Cancelled when someone had asked it to stop (it did), else failed with the reason."""
    if run.cancel_requested_at is not None:
        lifecycle.transition(run, lifecycle.Status.CANCELLED)
    else:
        lifecycle.fail(run, STOPPED)


def end_interrupted(host: str, pids: Collection[int]) -> list[int]:
    """End every run still ``running`` that a worker process in ``pids`` on ``host`` claimed
    (``Run.worker_pid`` is the pool process's pid); returns their ids. Runs of other workers,
    and runs whose worker reported their end meanwhile, are left alone."""
    if not pids:
        return []
    with get_sessionmaker()() as db:
        ids = db.scalars(select(Run.id).where(
            Run.status == lifecycle.Status.RUNNING, Run.worker_host == host,
            Run.worker_pid.in_(list(pids)))).all()
    ended = []
    for run_id in ids:
        with get_sessionmaker()() as db:
            run = get_run_for_update(db, run_id)
            if run is None or run.status != lifecycle.Status.RUNNING:
                continue
            _end(run)
            db.commit()
            log.warning("run %s: %s", run_id, run.error or "cancelled")
            ended.append(run_id)
    return ended
