"""Artifact rows: register an uploaded file, apply the retention setting, list, delete.

Functions flush, never commit (the caller owns the transaction). Files are removed only by the
caller after its commit (``files_to_remove`` lists them), so a rolled-back registration never
loses a file a committed row still points to.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.artifacts.models import Artifact
from app.artifacts.storage import Received
from app.core.config import get_settings
from grpodeck.contract.artifacts import ArtifactOut


def register(db: Session, *, run_id: int, kind: str, name: str, step: int | None,
             received: Received) -> tuple[Artifact, list[str]]:
    """Store the row for a received file; a second upload of the same name replaces the first
    (the worker retries, a script saves ``final`` twice). Returns the row and the stored files
    to delete after commit: the replaced one and checkpoints past ``GRPODECK_ARTIFACT_KEEP``."""
    stale: list[str] = []
    old = db.scalar(select(Artifact).where(Artifact.run_id == run_id, Artifact.name == name))
    if old is not None:
        stale.append(old.path)
        db.delete(old)
        db.flush()
    row = Artifact(run_id=run_id, kind=kind, name=name, step=step, size=received.size,
                   sha256=received.sha256, path=received.relpath)
    db.add(row)
    db.flush()
    if kind == "checkpoint":
        stale += apply_retention(db, run_id, get_settings().artifact_keep)
    return row, stale


def apply_retention(db: Session, run_id: int, keep: int) -> list[str]:
    """Delete the run's checkpoints beyond the newest ``keep`` (by step, then upload order);
    0 keeps all. Returns their stored files."""
    if keep <= 0:
        return []
    rows = db.scalars(select(Artifact).where(Artifact.run_id == run_id,
                                             Artifact.kind == "checkpoint")
                      .order_by(Artifact.step.desc().nulls_last(), Artifact.id.desc())).all()
    dropped = [row.path for row in rows[keep:]]
    for row in rows[keep:]:
        db.delete(row)
    db.flush()
    return dropped


def list_for(db: Session, run_id: int) -> Sequence[Artifact]:
    """A run's artifacts: checkpoints and models in step order, then the rest by name."""
    return db.scalars(select(Artifact).where(Artifact.run_id == run_id)
                      .order_by(Artifact.step.is_(None), Artifact.step, Artifact.name)).all()


def get(db: Session, run_id: int, artifact_id: int) -> Artifact | None:
    if not 0 < artifact_id < 2**31:
        return None
    row = db.get(Artifact, artifact_id)
    return row if row is not None and row.run_id == run_id else None


def has_artifacts(db: Session, run_id: int) -> bool:
    return db.scalar(select(Artifact.id).where(Artifact.run_id == run_id).limit(1)) is not None


def delete(db: Session, row: Artifact) -> str:
    """Remove one row; returns its stored file for the caller to delete after commit."""
    db.delete(row)
    db.flush()
    return row.path


def out(row: Artifact) -> ArtifactOut:
    return ArtifactOut(id=row.id, run_id=row.run_id, kind=row.kind,  # type: ignore[arg-type]
                       name=row.name, step=row.step, size=row.size, sha256=row.sha256,
                       created_at=row.created_at,
                       url=f"/api/runs/{row.run_id}/artifacts/{row.id}/file")
