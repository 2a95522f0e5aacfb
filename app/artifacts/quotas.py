"""How many more artifact bytes a run may store: the upload cap, the run's quota, its owner's.

Why quotas: the per-upload cap alone let any token holder fill the disk 8 GiB at a time, again
and again (issue 33). A run may keep ``GRPODECK_ARTIFACT_RUN_QUOTA_BYTES`` in all, the user who
launched or imported it ``GRPODECK_ARTIFACT_USER_QUOTA_BYTES`` over all their runs (0: no quota).
A re-upload under the same name replaces the earlier file, so that file's bytes count as free.

Why reservations: the room was read when an upload began and checked again when its row was
written, neither under a lock, so eight uploads at once each saw the same room and together
stored 163 % of the run's quota (issue 55). Now an upload reserves its bytes (its declared
length, else all the room left) under the run's lock, and its owner's where a user quota
applies, before its body streams in; reserved bytes count as used until the upload is stored or
refused. Functions flush, never commit: the caller holds the lock (``write`` around
``get_run_for_update``) and owns the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.artifacts.models import Artifact, ArtifactReservation
from app.auth.models import User
from app.core.config import get_settings
from app.runs.models import Run

# A reservation left by a server that died mid-upload holds nothing after this (an 8 GiB
# upload at 1 MB/s takes about 2.3 hours)
RESERVATION_TTL = timedelta(hours=24)


@dataclass(frozen=True)
class Room:
    """Bytes an upload may still take, and what sets that number (for the 413's message)."""

    bytes: int
    why: str

    def message(self) -> str:
        return f"the artifact is larger than {max(self.bytes, 0)} bytes: {self.why}"


@dataclass(frozen=True)
class Held:
    """A reservation: its id, the bytes it holds, and the 413's message past them."""

    id: int
    size: int
    past: str


class Full(Exception):
    """No room for the upload: ``room`` says how much there is and why."""

    def __init__(self, room: Room) -> None:
        super().__init__(room.message())
        self.room = room


def _used(db: Session, *where: object) -> int:
    return int(db.scalar(select(func.coalesce(func.sum(Artifact.size), 0))
                         .join(Run, Run.id == Artifact.run_id).where(*where)) or 0)


def _reserved(db: Session, *where: object) -> int:
    """Bytes uploads in progress hold (reservations not yet expired)."""
    live = ArtifactReservation.expires_at > datetime.now(UTC)
    return int(db.scalar(select(func.coalesce(func.sum(ArtifactReservation.size), 0))
                         .join(Run, Run.id == ArtifactReservation.run_id)
                         .where(live, *where)) or 0)


def _held(stored: int, reserved: int) -> str:
    return f"{stored} bytes" + (f" (and uploads in progress hold {reserved} more)"
                                if reserved else "")


def room(db: Session, run: Run, name: str) -> Room:
    """The smallest of the upload cap and what the run's and its owner's quotas leave, with
    the bytes uploads in progress reserved counted as used."""
    settings = get_settings()
    best = Room(settings.artifact_max_bytes,
                "the limit for one upload (GRPODECK_ARTIFACT_MAX_BYTES)")
    replaced = Artifact.name != name
    if settings.artifact_run_quota_bytes:
        used = _used(db, Artifact.run_id == run.id, replaced)
        reserved = _reserved(db, ArtifactReservation.run_id == run.id)
        left = settings.artifact_run_quota_bytes - used - reserved
        if left < best.bytes:
            best = Room(left, f"run {run.id} already stores {_held(used, reserved)} of "
                              f"artifacts, its quota is {settings.artifact_run_quota_bytes} "
                              "(GRPODECK_ARTIFACT_RUN_QUOTA_BYTES): delete some first")
    if settings.artifact_user_quota_bytes and run.created_by_id is not None:
        used = _used(db, Run.created_by_id == run.created_by_id,
                     (Artifact.run_id != run.id) | replaced)
        reserved = _reserved(db, Run.created_by_id == run.created_by_id)
        left = settings.artifact_user_quota_bytes - used - reserved
        if left < best.bytes:
            best = Room(left, f"the runs of this run's owner already store "
                              f"{_held(used, reserved)} of artifacts, the quota per user is "
                              f"{settings.artifact_user_quota_bytes} "
                              "(GRPODECK_ARTIFACT_USER_QUOTA_BYTES): delete some first")
    return best


def reserve(db: Session, run: Run, name: str, declared: int | None) -> Held:
    """Hold ``declared`` bytes (all the room left when the length is not declared) for an
    upload to ``run``, locked by the caller; ``Full`` when they do not fit. The owner's row is
    locked too where a user quota applies (uploads to their other runs count)."""
    if get_settings().artifact_user_quota_bytes and run.created_by_id is not None:
        db.execute(select(User.id).where(User.id == run.created_by_id).with_for_update())
    db.execute(delete(ArtifactReservation)
               .where(ArtifactReservation.expires_at <= datetime.now(UTC)))
    free = room(db, run, name)
    wanted = free.bytes if declared is None else declared
    if free.bytes <= 0 or wanted > free.bytes:
        raise Full(free)
    held = ArtifactReservation(run_id=run.id, size=wanted,
                               expires_at=datetime.now(UTC) + RESERVATION_TTL)
    db.add(held)
    db.flush()
    past = free.message() if declared is None else (
        f"the body is longer than the {declared} bytes its Content-Length declared")
    return Held(held.id, wanted, past)


def release(db: Session, reservation_id: int) -> None:
    """Give the bytes back (the upload was stored, refused or failed)."""
    db.execute(delete(ArtifactReservation).where(ArtifactReservation.id == reservation_id))
