"""What the runs list can be sorted by: a whitelist of columns, each an SQL expression ordered
on the server over every matching run (not the page shown), unknown values last in either
direction, ties broken by id (newest first) so pages never overlap or skip a run.

The numeric columns read the same values the row shows (app/listing/row_numbers.py): a
metric's last finite point (one index seek per run: its last chunk's ``last_finite``) and the
best reward over the run's finest stored summaries. Batches still waiting in a run's inbox count once
the settler (``app/metrics/settler.py``) has spread them, within a second or so: a sort never
takes a run's write lock to spread them itself (issue 36). The sort key comes from this
whitelist only; the user's text never reaches the SQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, case, func, literal_column, select

from app.metrics import rollups, store
from app.metrics.models import MetricRollup
from app.runs.models import Run

DIRECTIONS = ("asc", "desc")
ALIASES = {"newest": ("id", "desc"), "oldest": ("id", "asc")}  # the list's first sort names


@dataclass(frozen=True)
class SortKey:
    label: str
    expression: Callable[[], ColumnElement]  # built per query: correlated to runs.id
    first: str  # the direction a first click sorts in (numbers: highest first)
    nullable: bool = True  # unknown values exist: put them last


def _last(metric: str) -> ColumnElement:
    """The metric's last finite value, from its chunks' ``last_finite`` (``runs`` correlated)."""
    return literal_column(store.last_finite_sql(metric))


def _best_reward() -> ColumnElement:
    return (select(func.max(MetricRollup.vmax))
            .where(MetricRollup.run_id == Run.id,
                   MetricRollup.level == rollups.STORED_FROM,
                   MetricRollup.name == "reward")
            .correlate(Run).scalar_subquery())


def _steps_per_second() -> ColumnElement:
    """1 / the worker's step time; unknown for imports (as the row shows)."""
    return case((Run.source == "imported", None),
                else_=1.0 / func.nullif(Run.seconds_per_step, 0))


SORTS: dict[str, SortKey] = {
    "id": SortKey("run id", lambda: Run.id, "desc", nullable=False),
    "name": SortKey("name", lambda: Run.name, "asc", nullable=False),
    "model": SortKey("model", lambda: Run.spec["model"].as_string(), "asc"),
    "status": SortKey("status", lambda: Run.status, "asc", nullable=False),
    "verdict": SortKey("health", lambda: Run.verdict, "asc"),
    "created": SortKey("created", lambda: Run.created_at, "desc", nullable=False),
    "reward": SortKey("reward", lambda: _last("reward"), "desc"),
    "best": SortKey("best reward", _best_reward, "desc"),
    "kl": SortKey("KL", lambda: _last("kl"), "desc"),
    "zero_spread": SortKey("zero-spread", lambda: _last("frac_reward_zero_std"), "desc"),
    "steps_per_s": SortKey("steps/s", _steps_per_second, "desc"),
}


def order_by(sort: str, direction: str) -> list[ColumnElement]:
    """ORDER BY for a whitelisted key: unknown values last, then the key, then id."""
    key = SORTS[sort]
    column = key.expression()
    ordered = column.desc() if direction == "desc" else column.asc()
    head = [column.is_(None)] if key.nullable else []
    tail = [] if sort == "id" else [Run.id.desc()]
    return [*head, ordered, *tail]
