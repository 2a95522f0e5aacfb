"""A file a run produced (checkpoint, final model, trainer state), stored by the server."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, ForeignKey, Integer, String, UniqueConstraint, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class Artifact(Base):
    """One stored artifact. ``path`` is relative to the artifacts directory and chosen by the
    server (``<run id>/<random>.bin``), never by the uploader, so no name can point elsewhere;
    ``name`` is only what the download is called. The row goes with its run (ON DELETE
    CASCADE); the file goes with it through ``app.artifacts.storage``."""

    __tablename__ = "run_artifacts"
    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(128))
    step: Mapped[int | None] = mapped_column(Integer)
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    path: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                 server_default=func.now())


class ArtifactReservation(Base):
    """Bytes an upload in progress holds against its run's and its owner's quotas: taken under
    the run's lock before the body streams in, turned into the ``Artifact`` row when it is
    stored, given back when it is refused or fails (``app.artifacts.quotas``).

    Why: the free room was read when an upload began and checked again when its row was
    written, neither under a lock, so eight uploads at once each saw the same room and together
    stored 163 % of the run's quota (issue 55). ``expires_at``: a reservation left by a server
    that died mid-upload holds nothing after it."""

    __tablename__ = "artifact_reservations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
