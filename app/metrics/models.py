"""Metrics as received (one row per step) and as read (one value per run, metric and step).

Ingest writes ``metric_inbox``: one row per step whose metrics are one JSON object, trackio's
layout, so a batch of N steps is N rows however many metrics a step logs. Before anything reads
a run's metrics, ``rollups.settle`` spreads its inbox into ``metric_points`` (one row per value,
the primary key the chart queries walk: run -> name -> steps in order) and its summaries, in one
set-based statement each, then empties it. The primary keys make both idempotent.
"""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, SmallInteger, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class InboxStep(Base):
    """One received step not yet spread into ``metric_points``: ``metrics`` is a JSON object of
    canonical name -> number, a non-finite value as its text ("nan", "inf", "-inf")."""

    __tablename__ = "metric_inbox"
    __table_args__: ClassVar = {"sqlite_with_rowid": False}

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    metrics: Mapped[str] = mapped_column(Text)


class MetricPoint(Base):
    __tablename__ = "metric_points"
    __table_args__: ClassVar = {"sqlite_with_rowid": False}  # clustered (migration perf_0001)

    # On PostgreSQL the table has no foreign key (migration ingest_0001: its per-row check was
    # ~40 % of storing a point); ``run_page.removal.delete_run`` deletes the points itself.
    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[float | None] = mapped_column(Float)  # None stores NaN/inf faithfully below
    raw: Mapped[str | None] = mapped_column(String(8))  # "nan", "inf", "-inf" when not finite


class MetricRollup(Base):
    """A summary of one metric over a bucket of ``16**level`` steps (app/metrics/rollups.py).

    The key leads with (run, level) so a chart reads one level of all its metrics as one range.
    """

    __tablename__ = "metric_rollups"
    __table_args__: ClassVar = {"sqlite_with_rowid": False}

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    bucket: Mapped[int] = mapped_column(Integer, primary_key=True)  # step // 16**level
    n: Mapped[int] = mapped_column(Integer)  # finite values
    vsum: Mapped[float | None] = mapped_column(Float)
    vmin: Mapped[float | None] = mapped_column(Float)
    vmax: Mapped[float | None] = mapped_column(Float)
    first_step: Mapped[int] = mapped_column(Integer)
    last_step: Mapped[int] = mapped_column(Integer)
    nonfinite: Mapped[int] = mapped_column(Integer)  # NaN/inf values in the bucket
    nonfinite_step: Mapped[int | None] = mapped_column(Integer)  # the first of them
    nonfinite_raw: Mapped[str | None] = mapped_column(String(8))  # one of their kinds


class SystemSample(Base):
    """One sample of the client's system sampler (``grpodeck.client.system``), keyed by its own
    time (``system/time``, in ms), not by step: an evaluation or a checkpoint save spends
    minutes inside one step, and ``metric_points`` keeps one value per step and name, so the
    samples taken then were one point (issue 56). ``step`` is the latest step the trainer had
    logged; ``metrics`` a JSON object of its finite ``system/*`` values. The system charts draw
    these; ``metric_points`` keeps each step's last sample as before (checks, API, summaries)."""

    __tablename__ = "system_samples"
    __table_args__: ClassVar = {"sqlite_with_rowid": False}

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    at_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    step: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[str] = mapped_column(Text)
