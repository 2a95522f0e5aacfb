"""Stored findings of a run: one row per (category, metric), kept after it resolves."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class FindingRecord(Base):
    __tablename__ = "findings"
    __table_args__ = (UniqueConstraint("run_id", "category", "metric_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    category: Mapped[str] = mapped_column(String(40))
    metric_key: Mapped[str] = mapped_column(String(200), default="")  # "" when run-wide
    severity: Mapped[str] = mapped_column(String(10))
    first_step: Mapped[int] = mapped_column(Integer)
    last_step: Mapped[int] = mapped_column(Integer)
    summary: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)
    actions: Mapped[list[str]] = mapped_column(JSON)
    active: Mapped[bool] = mapped_column(default=True)
    opened_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # a severity change waiting for confirmation (app/health/stability.py Memory), else None
    stability: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    @property
    def metric(self) -> str | None:
        return self.metric_key or None

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "severity": self.severity,
                "first_step": self.first_step, "last_step": self.last_step,
                "summary": self.summary, "evidence": self.evidence, "actions": self.actions,
                "metric": self.metric, "active": self.active,
                "confirming": self.stability is not None}


@dataclass(frozen=True)
class FindingChange:
    """What one ``store()`` did to a finding's shown severity: ``before`` None means it opened,
    ``after`` None means it resolved, both set means it changed severity. Alerts are derived
    from these transitions (``app/alerts/service.py``), never from re-reading every finding."""

    record: FindingRecord
    before: str | None
    after: str | None

    @property
    def kind(self) -> str:
        return "opened" if self.before is None else ("resolved" if self.after is None
                                                     else "changed")


@dataclass
class Stored:
    """The result of ``store()``: the active (shown) records and what changed."""

    active: list[FindingRecord] = field(default_factory=list)
    changes: list[FindingChange] = field(default_factory=list)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.active)  # callers that only want the active records keep working


class DiagnosticsRecord(Base):
    """A run's incremental diagnostics state (about 100 kB of JSON) and the last step it covers.

    Its own table, not a column of ``runs``: the run row is updated by every report batch, and
    on PostgreSQL each update of a row that carried the state wrote a new copy of it (626 MB of
    dead tuples for 14 runs, issue 12). Written at most every ``diagnostics_persist_seconds``
    per live run (app/health/state_cache.py)."""

    __tablename__ = "diagnostics_states"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"),
                                        primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    through: Mapped[int] = mapped_column(Integer)
