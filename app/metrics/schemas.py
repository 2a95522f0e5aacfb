"""Wire format of the report API, shared by the web app and any reporting script."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.core.fields import Text
from app.rollouts.schemas import MAX_STEP, RolloutStep

# A value may be a number (NaN and +-inf included: JSON's NaN/Infinity, and 1e400, which JSON
# parsers read as inf, are stored as non-finite points) or a numeric string ("nan", "0.5").
MetricValue = float | int | Text(1_000) | None


class MetricRow(BaseModel):
    step: int = Field(ge=0, lt=MAX_STEP, description="the trainer's global step, below 2**31")
    metrics: dict[Text(1_000), MetricValue] = Field(
        max_length=2_000, description="metric name -> value; names past 200 characters are cut")


class MetricBatch(BaseModel):
    rows: list[MetricRow] = Field(default_factory=list, max_length=10_000)
    rollouts: list[RolloutStep] = Field(default_factory=list, max_length=200)


class IngestReply(BaseModel):
    accepted: int
    stop: bool
    reason: str | None = None
