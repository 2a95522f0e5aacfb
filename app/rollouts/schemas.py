"""Wire format of captured rollouts (the worker sends them with its metric batches)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.core.fields import CleanText, FiniteOrNull, Text

MAX_TEXT = 20_000
# Steps are a trainer's optimizer step count: two billion is beyond any run, and it is what a
# 32-bit integer column (PostgreSQL ``integer``) holds. Larger values are refused (422).
MAX_STEP = 2**31


class Completion(BaseModel):
    # Model output is untrusted: what a database cannot store (NUL, lone surrogates) is replaced,
    # and text past 40,000 characters is cut (the worker sends at most 20,000).
    text: CleanText(MAX_TEXT * 2)
    rewards: dict[Text(200), FiniteOrNull] = Field(default_factory=dict, max_length=64)
    total: FiniteOrNull = None
    advantage: FiniteOrNull = None
    length: int | None = Field(None, ge=0, lt=MAX_STEP)  # tokens; unknown for imported parquet
    truncated: bool | None = None


class Group(BaseModel):
    index: int = Field(ge=0, lt=MAX_STEP)
    prompt: CleanText(MAX_TEXT * 2)
    completions: list[Completion] = Field(min_length=1, max_length=512)


class RolloutStep(BaseModel):
    step: int = Field(ge=0, lt=MAX_STEP)
    groups: list[Group] = Field(max_length=256)
