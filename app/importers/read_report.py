"""What was read from a log, in words: the format, the steps, each original name and what it
was read as, and, when no reward was read, the ``--map`` line to try.

Why: a verdict is only as honest as the reading behind it. "read `mean_reward` as reward"
lets a user check the Deck understood their loop; an ``unknown`` verdict that names the keys
and the exact ``--map`` to try turns a dead end into one more command.
"""

from __future__ import annotations

import shlex

from app.importers.base import ImportedLog
from app.importers.entries import ROW_ORDER
from app.metrics.inference import NOT_A_MEAN, is_canonical, words

REWARD_HINTS = ("reward", "score", "return", "acc")  # key words a reward is usually called
# a summary or a quantity that is never the reward itself, whatever it is called
# (``rollout_reward_max``, ``Ent``, ``response_length``, ``reward_count``, ``gen_time``)
NEVER_THE_REWARD = NOT_A_MEAN | frozenset({"entropy", "ent", "length", "len", "lengths", "lens",
                                           "time", "seconds", "sec", "secs", "s", "ms",
                                           "duration", "timing"})
MAX_RENAMES_SHOWN = 30


def renames_text(renames: dict[str, str]) -> str:
    """``"`mean_reward` as reward, `KL` as kl"`` (sorted, at most ``MAX_RENAMES_SHOWN``)."""
    items = sorted(renames.items())
    shown = ", ".join(f"`{k}` as {v}" for k, v in items[:MAX_RENAMES_SHOWN])
    more = len(items) - MAX_RENAMES_SHOWN
    return shown + (f" (+{more} more)" if more > 0 else "")


def suggested_map(keys: set[str] | frozenset[str]) -> str | None:
    """The ``--map KEY=reward`` to try on a log where no reward was read: the key that looks
    most like a reward (by name), else the first one; never a max, min, spread, entropy,
    length, count or time column, nor a name already known (``kl``): None when no key is left."""
    ordered = sorted(k for k in keys if could_be_the_reward(k))
    liked = [k for k in ordered if any(h in k.lower() for h in REWARD_HINTS)]
    if not (liked or ordered):
        return None
    return f"--map {shlex.quote((liked or ordered)[0] + '=reward')}"


def could_be_the_reward(key: str) -> bool:
    """Not a known name, and no word that makes it a summary or a quantity (``_max``, ``Ent``)."""
    return not is_canonical(key) and not set(words(key)) & NEVER_THE_REWARD


def _placed(meta: dict) -> str:
    """``, steps from `grpo_step`, 3 eval rows as eval_*``: what a reader inferred."""
    parts = []
    step_from = meta.get("step_from")
    if step_from == ROW_ORDER:
        parts.append("steps from the row order")
    elif step_from:
        parts.append(f"steps from `{step_from}`")
    if count := meta.get("eval_rows"):
        parts.append(f"{count} eval row{'' if count == 1 else 's'} as eval_*")
    return "".join(f", {p}" for p in parts)


def read_summary(log: ImportedLog) -> dict:
    """JSON-safe: format, number of steps, first and last step, where the steps came from when
    a reader inferred them (``step_from``: a key, or ``row order``; else None), and the renames
    made."""
    steps = [s for s, _ in log.rows]
    return {"format": log.source_format, "steps": len(steps),
            "first_step": steps[0] if steps else None, "last_step": steps[-1] if steps else None,
            "step_from": log.meta.get("step_from"), "read_as": dict(sorted(log.renames.items()))}


def read_lines(log: ImportedLog) -> list[str]:
    """``Read: console, 120 steps (1-120)`` (with where the steps came from when they were
    inferred: ``steps from `grpo_step```, ``steps from the row order``; and how many eval rows
    were read as eval series), and ``Read as: ...`` when anything was renamed."""
    summary = read_summary(log)
    lines = [(f"Read: {summary['format']}, {summary['steps']} steps "
             f"({summary['first_step']}-{summary['last_step']}){_placed(log.meta)}")]
    if log.renames:
        lines.append(f"Read as: {renames_text(log.renames)}")
    return lines
