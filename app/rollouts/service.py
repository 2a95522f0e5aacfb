"""Store captured rollouts, keep their storage bounded, and derive per-step signals.

Signals (identical groups, repetition, empty completions) become ordinary metric points, so the
charts and the diagnostics see them like any metric TRL logs.

A completion sent without a ``total`` (``log_rollouts`` with reward components only) gets the
weighted total the trainer used when the run's reward weights are known (a launched run's
spec ``rewards``: name/weight) and every component it carries has a weight; it is stored with
``"total_from": "weights"``. Otherwise no sum is assumed and the group's outcome says so
(``signals.group_summary``: "no total sent", spread over the components).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.core.config import get_settings
from app.health.service import _reward_weights as reward_weights  # one reading of the spec
from app.rollouts.models import RolloutGroup
from app.rollouts.signals import group_summary, step_signals
from app.runs.models import Run
from grpodeck.contract.wire import Group, RolloutStep


def prompt_key(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


def _finite(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def derived_total(rewards: dict[str, float | None], weights: dict[str, float]) -> float | None:
    """TRL's total (nansum of weight * component) when every component has a weight; None
    when one has none (its weight is unknown) or no component has a number."""
    if not rewards or any(name not in weights for name in rewards):
        return None
    terms = [weights[name] * value for name, value in rewards.items()
             if value is not None and math.isfinite(value)]
    return float(sum(terms)) if terms else None


def _with_totals(group: Group, weights: dict[str, float] | None) -> dict:
    """The group as sent (only the fields the client set), a missing total derived from the
    weights when it can be."""
    data = group.model_dump(mode="json", exclude_unset=True)
    if weights:
        for completion in data["completions"]:
            total = None if "total" in completion else derived_total(
                completion.get("rewards") or {}, weights)
            if total is not None:
                completion["total"], completion["total_from"] = total, "weights"
    return data


def _record(run_id: int, step: int, group: Group, weights: dict[str, float] | None
            ) -> RolloutGroup:
    sent = _with_totals(group, weights)
    outcome, spread = group_summary(sent)
    full = group.model_dump(mode="json")["completions"]
    completions = [{**c, **{k: v for k, v in s.items() if k in ("total", "total_from")}}
                   for c, s in zip(full, sent["completions"], strict=True)]
    advantages = _finite([c.advantage for c in group.completions])
    return RolloutGroup(
        run_id=run_id, step=step, group_index=group.index, prompt=group.prompt,
        prompt_key=prompt_key(group.prompt), completions=completions,
        outcome=outcome, reward_spread=spread,
        max_advantage=max(advantages) if advantages else None,
        min_advantage=min(advantages) if advantages else None,
        any_truncated=any(c.truncated for c in group.completions))


def store(db: Session, run_id: int, steps: Sequence[RolloutStep]) -> list[tuple[int, dict[str, float]]]:
    """Replace the groups of each step sent (re-sends are idempotent; a step sent twice in one
    batch keeps its last groups); returns signal rows.

    One DELETE for the whole batch, without the ORM's session synchronisation: per step, that
    synchronisation walked every object the batch had added so far (quadratic in the batch:
    ~5 ms per captured step at 50 steps a POST, most of the time a client's spool took to
    drain)."""
    signal_rows = []
    latest = {item.step: item for item in sorted(steps, key=lambda s: s.step) if item.groups}
    if not latest:
        return signal_rows
    run = db.get(Run, run_id)
    weights = reward_weights(run.spec or {}) if run is not None else None
    db.execute(delete(RolloutGroup).where(RolloutGroup.run_id == run_id,
                                          RolloutGroup.step.in_(list(latest)))
               .execution_options(synchronize_session=False))
    for step, item in latest.items():
        db.add_all(_record(run_id, step, g, weights) for g in item.groups)
        signal_rows.append((step, step_signals([g.model_dump(mode="json") for g in item.groups])))
    if signal_rows:
        db.flush()
        thin(db, run_id, get_settings().rollout_max_steps)
    return signal_rows


def captured_steps(db: Session, run_id: int) -> list[int]:
    stmt = select(RolloutGroup.step).where(RolloutGroup.run_id == run_id).distinct()
    return sorted(db.scalars(stmt).all())


def nearest_step(captured: Sequence[int], wanted: int,
                 within: tuple[int, int] | None = None) -> int:
    """The captured step closest to ``wanted`` (the earlier of two as close). Rollouts are
    kept only every ``rollout_every`` steps and thinned, so a finding's last step is rarely one
    of them: with ``within`` (the finding's range) a captured step inside it is taken first,
    so the rollouts shown are of the steps the finding is about."""
    inside = [s for s in captured if within is not None and within[0] <= s <= within[1]]
    return min(inside or captured, key=lambda s: (abs(s - wanted), s))


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
