"""What was read from a log, in words: the format, the steps, each original name and what it
was read as, and, when no reward was read, the ``--map`` line to try.

Why: a verdict is only as honest as the reading behind it. "read `mean_reward` as reward"
lets a user check the Deck understood their loop; an ``unknown`` verdict that names the keys
and the exact ``--map`` to try turns a dead end into one more command.
"""

from __future__ import annotations

import shlex

from app.importers.base import ImportedLog

REWARD_HINTS = ("reward", "score", "return", "acc")  # key words a reward is usually called
MAX_RENAMES_SHOWN = 30


def renames_text(renames: dict[str, str]) -> str:
    """``"`mean_reward` as reward, `KL` as kl"`` (sorted, at most ``MAX_RENAMES_SHOWN``)."""
    items = sorted(renames.items())
    shown = ", ".join(f"`{k}` as {v}" for k, v in items[:MAX_RENAMES_SHOWN])
    more = len(items) - MAX_RENAMES_SHOWN
    return shown + (f" (+{more} more)" if more > 0 else "")


def suggested_map(keys: set[str] | frozenset[str]) -> str | None:
    """The ``--map KEY=reward`` to try on a log where no reward was read: the key that looks
    most like a reward (by name), else the first one; None for a log with no keys."""
    if not keys:
        return None
    ordered = sorted(keys)
    liked = [k for k in ordered if any(h in k.lower() for h in REWARD_HINTS)]
    key = (liked or ordered)[0]
    return f"--map {shlex.quote(key + '=reward')}"


def read_summary(log: ImportedLog) -> dict:
    """JSON-safe: format, number of steps, first and last step, and the renames made."""
    steps = [s for s, _ in log.rows]
    return {"format": log.source_format, "steps": len(steps),
            "first_step": steps[0] if steps else None, "last_step": steps[-1] if steps else None,
            "read_as": dict(sorted(log.renames.items()))}


def read_lines(log: ImportedLog) -> list[str]:
    """``Read: console, 120 steps (1-120)`` and ``Read as: ...`` when anything was renamed."""
    summary = read_summary(log)
    lines = [(f"Read: {summary['format']}, {summary['steps']} steps "
             f"({summary['first_step']}-{summary['last_step']})")]
    if log.renames:
        lines.append(f"Read as: {renames_text(log.renames)}")
    return lines
