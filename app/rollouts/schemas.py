"""Wire format of captured rollouts (the worker sends them with its metric batches)."""

from __future__ import annotations

from pydantic import BaseModel, Field

MAX_TEXT = 20_000


class Completion(BaseModel):
    text: str = Field(max_length=MAX_TEXT * 2)
    rewards: dict[str, float | None] = Field(default_factory=dict)
    total: float | None = None
    advantage: float | None = None
    length: int | None = None  # tokens; unknown for imported parquet files
    truncated: bool | None = None


class Group(BaseModel):
    index: int = Field(ge=0)
    prompt: str = Field(max_length=MAX_TEXT * 2)
    completions: list[Completion] = Field(min_length=1, max_length=512)


class RolloutStep(BaseModel):
    step: int = Field(ge=0)
    groups: list[Group] = Field(max_length=256)
