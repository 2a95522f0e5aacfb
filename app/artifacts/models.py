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
