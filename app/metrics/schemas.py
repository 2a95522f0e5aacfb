"""Wire format of the report API, shared by the web app and any reporting script."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.rollouts.schemas import RolloutStep

MetricValue = float | int | str | None


class MetricRow(BaseModel):
    step: int = Field(ge=0)
    metrics: dict[str, MetricValue]


class MetricBatch(BaseModel):
    rows: list[MetricRow] = Field(default_factory=list, max_length=10_000)
    rollouts: list[RolloutStep] = Field(default_factory=list, max_length=200)


class IngestReply(BaseModel):
    accepted: int
    stop: bool
    reason: str | None = None
