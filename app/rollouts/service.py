"""Store captured rollouts, keep their storage bounded, and derive per-step signals.

Signals (identical groups, repetition, empty completions) become ordinary metric points, so the
charts and the diagnostics see them like any metric TRL logs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.core.config import get_settings
from app.rollouts.models import RolloutGroup
from app.rollouts.signals import group_outcome, step_signals
from grpodeck.contract.wire import Group, RolloutStep


def prompt_key(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


def _finite(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _record(run_id: int, step: int, group: Group) -> RolloutGroup:
    data = group.model_dump(mode="json")
    totals = _finite([c.total for c in group.completions])
    advantages = _finite([c.advantage for c in group.completions])
    return RolloutGroup(
        run_id=run_id, step=step, group_index=group.index, prompt=group.prompt,
        prompt_key=prompt_key(group.prompt), completions=data["completions"],
        outcome=group_outcome(data),
        reward_spread=(max(totals) - min(totals)) if totals else None,
        max_advantage=max(advantages) if advantages else None,
        min_advantage=min(advantages) if advantages else None,
        any_truncated=any(c.truncated for c in group.completions))


def store(db: Session, run_id: int, steps: Sequence[RolloutStep]) -> list[tuple[int, dict[str, float]]]:
    """Replace the groups of each step sent (re-sends are idempotent); returns signal rows."""
    signal_rows = []
    for item in sorted(steps, key=lambda s: s.step):
        if not item.groups:
            continue
        db.execute(delete(RolloutGroup).where(RolloutGroup.run_id == run_id,
                                              RolloutGroup.step == item.step))
        db.add_all(_record(run_id, item.step, g) for g in item.groups)
        signal_rows.append((item.step, step_signals([g.model_dump(mode="json") for g in item.groups])))
    if signal_rows:
        db.flush()
        thin(db, run_id, get_settings().rollout_max_steps)
    return signal_rows


def captured_steps(db: Session, run_id: int) -> list[int]:
    stmt = select(RolloutGroup.step).where(RolloutGroup.run_id == run_id).distinct()
    return sorted(db.scalars(stmt).all())


def thin(db: Session, run_id: int, max_steps: int) -> None:
    """Past ``max_steps`` captured steps, drop every other older one (first and newest stay):
    a long run keeps an evenly spread, bounded sample instead of only its beginning."""
    steps = captured_steps(db, run_id)
    if len(steps) <= max_steps:
        return
    middle = steps[1:-1]
    drop = middle[::2]
    keep_after = len(steps) - len(drop)
    if keep_after > max_steps:  # still too many (max_steps tiny): drop the oldest beyond it
        drop += [s for s in middle[1::2]][: keep_after - max_steps]
    db.execute(delete(RolloutGroup).where(RolloutGroup.run_id == run_id,
                                          RolloutGroup.step.in_(drop)))
