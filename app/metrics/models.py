"""One stored value per (run, metric name, step).

The primary key makes ingest idempotent and is the index the chart queries walk
(run -> name -> steps in order).
"""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class MetricPoint(Base):
    __tablename__ = "metric_points"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[float | None] = mapped_column(Float)  # None stores NaN/inf faithfully below
    raw: Mapped[str | None] = mapped_column(String(8))  # "nan", "inf", "-inf" when not finite
