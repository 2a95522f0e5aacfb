"""Read captured rollouts back: one step with filters, one prompt across steps, and the
group-outcome shares over steps. Filtering is in Python on a bounded set (K groups per step,
a bounded number of steps), so the same rules serve the API and the pages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, field_validator
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.rollouts.models import RolloutGroup
from grpodeck.contract.fields import storable

Outcome = Literal["all_fail", "all_pass", "mixed", "no_total", "zero_spread"]
OUTCOMES = ("all_fail", "all_pass", "mixed", "no_total")  # as stored (signals.group_summary)
Sort = Literal["index", "advantage_high", "advantage_low"]


class RolloutFilter(BaseModel):
    """Query parameters of the inspector (all optional)."""

    outcome: Outcome | None = None
    truncated: bool | None = None
    component: str | None = None  # a reward function name ...
    min_value: float | None = None  # ... with a completion scoring at least this
    max_value: float | None = None  # ... or at most this
    q: str | None = None  # text search in the prompt and completions (case-insensitive)
    sort: Sort | None = "index"

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        """An HTML form sends untouched fields as '': that means 'no filter', not an error."""
        return None if value == "" else value

    @field_validator("sort", mode="after")
    @classmethod
    def _default_sort(cls, value: Sort | None) -> Sort:
        return value or "index"


def _component_match(group: RolloutGroup, f: RolloutFilter) -> bool:
    for c in group.completions:
        value = (c.get("rewards") or {}).get(f.component or "")
        if value is None:
            continue
        if (f.min_value is None or value >= f.min_value) and (
                f.max_value is None or value <= f.max_value):
            return True
    return False


def zero_spread(group: RolloutGroup) -> bool:
    """No learning signal: every completion scored alike (a group sent without totals and
    without any component number has no spread to speak of)."""
    if group.outcome == "mixed":
        return False
    return group.outcome != "no_total" or group.reward_spread is not None


def matches(group: RolloutGroup, f: RolloutFilter) -> bool:
    if f.outcome == "zero_spread" and not zero_spread(group):
        return False
    if f.outcome in OUTCOMES and group.outcome != f.outcome:
        return False
    if f.truncated is not None and group.any_truncated != f.truncated:
        return False
    if f.component and not _component_match(group, f):
        return False
    if f.q:
        needle = f.q.lower()
        texts = [group.prompt or "", *((c.get("text") or "") for c in group.completions)]
        if not any(needle in text.lower() for text in texts):
            return False
    return True


def is_filtered(f: RolloutFilter) -> bool:
    """Whether any filter (not the sort order) narrows the groups shown."""
    return any(v is not None for k, v in f.model_dump().items() if k != "sort")


def groups_at(db: Session, run_id: int, step: int | None) -> int:
    """How many groups were kept at a step (every captured step when None), before filters."""
    stmt = select(func.count()).select_from(RolloutGroup).where(RolloutGroup.run_id == run_id)
    if step is not None:
        stmt = stmt.where(RolloutGroup.step == step)
    return int(db.scalar(stmt) or 0)


def steps_seen(db: Session, run_id: int, keys: Sequence[str]) -> dict[str, int]:
    """Per prompt key, at how many captured steps the prompt was drawn (for "follow")."""
    if not keys:
        return {}
    stmt = (select(RolloutGroup.prompt_key, func.count(func.distinct(RolloutGroup.step)))
            .where(RolloutGroup.run_id == run_id, RolloutGroup.prompt_key.in_(set(keys)))
            .group_by(RolloutGroup.prompt_key))
    return {key: int(n) for key, n in db.execute(stmt)}


def _sorted(groups: list[RolloutGroup], sort: Sort) -> list[RolloutGroup]:
    if sort == "advantage_high":
        return sorted(groups, key=lambda g: -(g.max_advantage or 0.0))
    if sort == "advantage_low":
        return sorted(groups, key=lambda g: g.min_advantage or 0.0)
    return sorted(groups, key=lambda g: (g.step, g.group_index))


def find_groups(db: Session, run_id: int, step: int | None, f: RolloutFilter,
                limit: int = 200) -> list[RolloutGroup]:
    """Groups of one step (or of every captured step when ``step`` is None) that match."""
    stmt = select(RolloutGroup).where(RolloutGroup.run_id == run_id)
    if step is not None:
        stmt = stmt.where(RolloutGroup.step == step)
    groups = [g for g in db.scalars(stmt).all() if matches(g, f)]
    return _sorted(groups, f.sort)[:limit]


def prompt_history(db: Session, run_id: int, key: str) -> Sequence[RolloutGroup]:
    """The groups of one prompt across steps; none for a key no database could hold (a NUL or
    a lone surrogate from the URL: PostgreSQL refuses to compare with it, and no stored key,
    a hash of the prompt, has one)."""
    try:
        storable(key)
    except ValueError:
        return []
    stmt = (select(RolloutGroup).where(RolloutGroup.run_id == run_id,
                                       RolloutGroup.prompt_key == key)
            .order_by(RolloutGroup.step, RolloutGroup.group_index))
    return db.scalars(stmt).all()


def outcome_shares(db: Session, run_id: int) -> dict[int, dict[str, float]]:
    """Per captured step, the share of groups that are all-fail, all-pass, mixed and sent
    without totals (pass/fail unknown)."""
    stmt = (select(RolloutGroup.step, RolloutGroup.outcome, func.count())
            .where(RolloutGroup.run_id == run_id)
            .group_by(RolloutGroup.step, RolloutGroup.outcome))
    counts: dict[int, Counter[str]] = {}
    for step, outcome, n in db.execute(stmt):
        counts.setdefault(step, Counter())[outcome] += n
    return {step: {k: c[k] / sum(c.values()) for k in OUTCOMES}
            for step, c in sorted(counts.items())}


def advantages_by_step(db: Session, run_id: int) -> dict[int, list[float]]:
    stmt = select(RolloutGroup.step, RolloutGroup.completions).where(
        RolloutGroup.run_id == run_id).order_by(RolloutGroup.step)
    out: dict[int, list[float]] = {}
    for step, completions in db.execute(stmt):
        out.setdefault(step, []).extend(
            c["advantage"] for c in completions if c.get("advantage") is not None)
    return out


def spread_of(g: RolloutGroup) -> str | None:
    """What ``reward_spread`` measures: "total" (sent or derived from the run's weights),
    "components" (no total sent: the largest spread of one component), or None."""
    if g.reward_spread is None:
        return None
    return "total" if any(c.get("total") is not None for c in g.completions) else "components"


def group_dict(g: RolloutGroup) -> dict[str, object]:
    return {"step": g.step, "index": g.group_index, "prompt": g.prompt, "prompt_key": g.prompt_key,
            "outcome": g.outcome, "reward_spread": g.reward_spread, "spread_of": spread_of(g),
            "any_truncated": g.any_truncated, "completions": g.completions}
