"""Captured rollout groups: one row per (run, step, group), completions as JSON.

Per-group summaries (outcome, spread, truncation, advantage range) are columns so the
inspector's filters and the group-outcomes chart are plain queries.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class RolloutGroup(Base):
    __tablename__ = "rollout_groups"
    __table_args__ = (UniqueConstraint("run_id", "step", "group_index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    group_index: Mapped[int] = mapped_column(Integer)
    prompt: Mapped[str] = mapped_column(Text)
    prompt_key: Mapped[str] = mapped_column(String(64), index=True)  # sha256: follow a prompt
    completions: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    outcome: Mapped[str] = mapped_column(String(10))  # all_fail | all_pass | mixed
    reward_spread: Mapped[float | None] = mapped_column(Float)
    max_advantage: Mapped[float | None] = mapped_column(Float)
    min_advantage: Mapped[float | None] = mapped_column(Float)
    any_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
