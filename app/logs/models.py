"""The training child's output, stored with its run (the run page's Logs tab)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class RunLogChunk(Base):
    """A piece of one stream (stdout or stderr) of a run's training child, at its byte offset.

    ``id`` orders chunks as they arrived (the two streams interleave at the worker's poll
    interval); the unique (run, stream, offset) makes a resent chunk overwrite itself."""

    __tablename__ = "run_log_chunks"
    __table_args__ = (UniqueConstraint("run_id", "stream", "offset"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    stream: Mapped[str] = mapped_column(String(8))
    offset: Mapped[int] = mapped_column(BigInteger)
    text: Mapped[str] = mapped_column(Text)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                  server_default=func.now())
