"""Deleting a run: its rows in every domain's tables and its files, for the Delete buttons of the
run page and the list and for ``DELETE /api/runs/{id}``. Here, above the record, because it
reaches into metrics and artifacts, which the record knows nothing of."""

from __future__ import annotations

import shutil

from sqlalchemy.orm import Session

from app.artifacts.storage import remove_run
from app.core.config import get_settings
from app.metrics import store
from app.runs import lifecycle
from app.runs.models import Run


def deletion_refusal(run: Run) -> str | None:
    """Why the run may not be deleted yet: its worker would go on writing to it."""
    if lifecycle.is_live(run):
        return f"run {run.id} is {run.status}: cancel it before deleting it"
    return None


def delete_run(db: Session, run: Run) -> None:
    """Remove a finished run; its findings, rollups and rollouts go with it (ON DELETE CASCADE),
    its metric chunks too, deleted here first. Steps still in its inbox (a run failed as lost is
    never settled) go by their key's cascade."""
    store.delete_run(db, run.id)
    db.delete(run)
    db.flush()


def remove_files(run_id: int) -> None:
    """After the deletion is committed: the run's directory (spec, logs, spool, checkpoints)
    under the runs directory, when this machine holds it."""
    root = get_settings().runs_dir.resolve()
    path = (root / str(int(run_id))).resolve()
    if path.parent == root and path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    remove_run(run_id)  # the artifacts the server stores for it
