"""How many more artifact bytes a run may store: the upload cap, the run's quota, its owner's.

Why quotas: the per-upload cap alone let any token holder fill the disk 8 GiB at a time, again
and again (issue 33). A run may keep ``GRPODECK_ARTIFACT_RUN_QUOTA_BYTES`` in all, the user who
launched or imported it ``GRPODECK_ARTIFACT_USER_QUOTA_BYTES`` over all their runs (0: no quota).
A re-upload under the same name replaces the earlier file, so that file's bytes count as free.
The upload streams in with the smallest of the three as its limit, and the room is checked
again when the row is registered (two uploads at once cannot both take the last bytes... for
long: the second registration is refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.artifacts.models import Artifact
from app.core.config import get_settings
from app.runs.models import Run


@dataclass(frozen=True)
class Room:
    """Bytes an upload may still take, and what sets that number (for the 413's message)."""

    bytes: int
    why: str

    def message(self) -> str:
        return f"the artifact is larger than {max(self.bytes, 0)} bytes: {self.why}"


def _used(db: Session, *where: object) -> int:
    return int(db.scalar(select(func.coalesce(func.sum(Artifact.size), 0))
                         .join(Run, Run.id == Artifact.run_id).where(*where)) or 0)


def room(db: Session, run: Run, name: str) -> Room:
    """The smallest of the upload cap and what the run's and its owner's quotas leave."""
    settings = get_settings()
    best = Room(settings.artifact_max_bytes,
                "the limit for one upload (GRPODECK_ARTIFACT_MAX_BYTES)")
    replaced = Artifact.name != name
    if settings.artifact_run_quota_bytes:
        used = _used(db, Artifact.run_id == run.id, replaced)
        left = settings.artifact_run_quota_bytes - used
        if left < best.bytes:
            best = Room(left, f"run {run.id} already stores {used} bytes of artifacts, its quota "
                              f"is {settings.artifact_run_quota_bytes} "
                              "(GRPODECK_ARTIFACT_RUN_QUOTA_BYTES): delete some first")
    if settings.artifact_user_quota_bytes and run.created_by_id is not None:
        used = _used(db, Run.created_by_id == run.created_by_id,
                     (Artifact.run_id != run.id) | replaced)
        left = settings.artifact_user_quota_bytes - used
        if left < best.bytes:
            best = Room(left, f"the runs of this run's owner already store {used} bytes of "
                              f"artifacts, the quota per user is "
                              f"{settings.artifact_user_quota_bytes} "
                              "(GRPODECK_ARTIFACT_USER_QUOTA_BYTES): delete some first")
    return best
