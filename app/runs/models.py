"""The run record: a launched (or imported) GRPO run and where it stands."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.auth.models import User  # noqa: F401  (the table that created_by_id points to)
from app.core.db import Base


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(120), index=True)
    source: Mapped[str] = mapped_column(String(16), default="launched")  # launched | imported
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), index=True)
    max_steps: Mapped[int] = mapped_column(Integer)
    current_step: Mapped[int] = mapped_column(Integer, default=0)
    token_hash: Mapped[str | None] = mapped_column(String(64))  # set at claim, cleared at the end
    claim_hash: Mapped[str | None] = mapped_column(String(64))  # single-use ticket in the queue
    # made at the claim, handed to the supervisor only: it signs the rank lines the Devices
    # panel believes (grpodeck.contract.log_markers)
    marker_key: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(),
                                                 index=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_report_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_step_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # worker alive
    cancel_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    stop_reason: Mapped[str | None] = mapped_column(Text)
    worker_pid: Mapped[int | None] = mapped_column(Integer)
    worker_host: Mapped[str | None] = mapped_column(String(255))
    task_id: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    traceback_tail: Mapped[str | None] = mapped_column(Text)
    seconds_per_step: Mapped[float | None] = mapped_column(Float)
    verdict: Mapped[str | None] = mapped_column(String(16), index=True)  # healthy|warning|critical|unknown|...
    metric_names: Mapped[list[str] | None] = mapped_column(JSON)  # what the charts can draw
    # How its keys are read as canonical names (app/metrics/reading.py): the trainer vocabulary,
    # the user's metric_map and each rename made, kept so every batch is read the same way.
    metric_reading: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # who launched or imported it; None for runs from before accounts, the CLI import, dev mode
    created_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True)
    # Bumped by every diagnostics update. The state itself lives in ``diagnostics_states``
    # (app/health/models.py), off this row: app/health/state_cache.py keeps it between batches.
    diagnostics_revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Steps whose chart summaries above level 1 are out of date (app/metrics/rollups.py).
    rollups_stale_lo: Mapped[int | None] = mapped_column(Integer)
    rollups_stale_hi: Mapped[int | None] = mapped_column(Integer)
    # The run this one was cloned from ("New run from this one"); its page diffs the two specs.
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    # The finding a "Try this fix" run answers (app/launch/answers.py): its id (no foreign key:
    # findings go with their run, and this run still says what it tried) and its category.
    answers_finding_id: Mapped[int | None] = mapped_column(Integer)
    answers_category: Mapped[str | None] = mapped_column(String(40))
    note: Mapped[str | None] = mapped_column(Text)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    # A smoke test runs a few steps of a spec; this is the max_steps of the full run it offers.
    smoke_full_steps: Mapped[int | None] = mapped_column(Integer)
    # The sweep that launched this run with its siblings (``/sweeps/{sweep_id}``).
    sweep_id: Mapped[str | None] = mapped_column(String(32), index=True)
    # What the training child said it is doing (grpodeck.contract.wire.Stage); "training" and
    # "queued" are read from the run itself (app/run_page/stages.py).
    stage: Mapped[str | None] = mapped_column(String(20))
    # While it evaluates {done, total, since}; after, {last_s}: the last evaluation's length
    # (app/runs/progress.py counts the evaluations still ahead in the ETA)
    eval_progress: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class RunTag(Base):
    """One tag on one run. A table rather than a JSON list so the runs list can filter by tag
    with an index lookup on both SQLite and PostgreSQL."""

    __tablename__ = "run_tags"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"),
                                        primary_key=True)
    tag: Mapped[str] = mapped_column(String(40), primary_key=True, index=True)
