"""What the worker posts back for a dry run, bounded so a broken worker cannot flood the
database (texts are cut, counts capped)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from grpodeck.contract.fields import CleanText, FiniteOrNull, Text

MAX_TEXT = 4_000


class ScoredCompletion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: CleanText(MAX_TEXT) = ""  # model output: cleaned and cut, never refused
    rewards: dict[Text(64), FiniteOrNull] = Field(default_factory=dict, max_length=16)


class ScoredGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: CleanText(MAX_TEXT) = ""
    completions: list[ScoredCompletion] = Field(max_length=64)


class ReferenceScores(BaseModel):
    """The dataset's reference answers scored by each reward (when it has such a column)."""

    model_config = ConfigDict(extra="forbid")

    column: Text(64)
    count: int = Field(ge=0, le=1_000)
    rewards: dict[Text(64), list[FiniteOrNull]] = Field(default_factory=dict, max_length=16)


class DryRunResultIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    weights: dict[Text(64), float] = Field(default_factory=dict, max_length=16)
    groups: list[ScoredGroup] = Field(default_factory=list, max_length=64)
    error: CleanText(20_000, keep_tail=True) | None = None  # a traceback: its end matters
    timings: dict[Text(40), float] = Field(default_factory=dict, max_length=16)
    reference: ReferenceScores | None = None


class DryRunAliveIn(BaseModel):
    """The worker's sign of life while it samples a dry run: which worker it is."""

    model_config = ConfigDict(extra="forbid")

    worker: Text(200) | None = None
