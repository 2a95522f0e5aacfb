"""Metrics as received (one row per step) and as read (one value per run, metric and step).

Ingest writes ``metric_inbox``: one row per step whose metrics are one JSON object, trackio's
layout, so a batch of N steps is N rows however many metrics a step logs. The settler
(``rollups.settle``) moves a run's inbox into ``metric_chunks`` (per metric, its points over an
aligned range of steps, compressed: ``app/metrics/chunks.py``) and recomputes its summaries
(``metric_rollups``), then empties it. Rewriting a chunk and recomputing a bucket make both
idempotent.
"""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import (
    BigInteger,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class InboxStep(Base):
    """One received step not yet spread into ``metric_chunks``: ``metrics`` is a JSON object of
    canonical name -> number, a non-finite value as its text ("nan", "inf", "-inf")."""

    __tablename__ = "metric_inbox"
    __table_args__: ClassVar = {"sqlite_with_rowid": False}

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    metrics: Mapped[str] = mapped_column(Text)


class MetricKey(Base):
    """A metric name's small id: every chunk carries the id, not the name (issue 57). Shared by
    all runs (a TRL run's ~25 names are the same in every run) and never deleted, so an id
    once given always means the same name."""

    __tablename__ = "metric_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)


class MetricChunk(Base):
    """Every point of one metric of one run in one aligned range of steps
    (``app/metrics/chunks.py``: ``chunk`` is ``step >> CHUNK_BITS``), compressed. ``last_finite``
    is the chunk's last finite value: the runs list sorts by a metric's last value without
    decoding anything."""

    __tablename__ = "metric_chunks"
    __table_args__: ClassVar = {"sqlite_with_rowid": False}

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    metric_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    chunk: Mapped[int] = mapped_column(Integer, primary_key=True)
    first_step: Mapped[int] = mapped_column(Integer)
    last_step: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(Integer)
    last_finite: Mapped[float | None] = mapped_column(Float)
    data: Mapped[bytes] = mapped_column(LargeBinary)


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
    minutes inside one step, and the metric store keeps one value per step and name, so the
    samples taken then were one point (issue 56). ``step`` is the latest step the trainer had
    logged; ``metrics`` a JSON object of its finite ``system/*`` values. The system charts draw
    these; the metric store keeps each step's last sample as before (checks, API, summaries)."""

    __tablename__ = "system_samples"
    __table_args__: ClassVar = {"sqlite_with_rowid": False}

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    at_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    step: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[str] = mapped_column(Text)
