"""A reward's score with the reason it is low, and how both reach TRL and the rollout inspector.

TRL 1.16 hands every reward function ``log_extra(column, values)`` (one value per completion,
kept aligned with the batch in ``trainer._logs["extra"]``) and ``log_metric(name, value)``
(averaged per logging step). A reward that can explain a 0 logs its reasons under
``reason_column(name)``; ``worker.training.rollouts`` picks those columns up and stores them next
to the reward components, so the inspector shows "timeout" beside the completion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

REASON_PREFIX = "reason:"
MAX_REASON_CHARS = 300


@dataclass(frozen=True)
class Outcome:
    """One completion's score; ``reason`` is None when nothing needs explaining."""

    score: float | None
    reason: str | None = None


def reason_column(reward_name: str) -> str:
    return f"{REASON_PREFIX}{reward_name}"


def short(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """Reasons quote model output and error messages: keep them one bounded line."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def report(fn: Callable[..., Any], outcomes: Sequence[Outcome], kwargs: dict[str, Any]) -> list[float | None]:
    """Log the reasons through TRL (when it passed ``log_extra``) and return the scores."""
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra(reason_column(fn.__name__), [o.reason for o in outcomes])
    return [o.score for o in outcomes]
