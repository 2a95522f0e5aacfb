"""The numbers of each row of the runs list: last and best reward, KL, zero-spread share,
steps per second, runtime, and a reward sparkline.

Why here and not in the page query: the list's page query stays three queries whatever it
shows; these numbers cost a few keyed lookups per shown run (the last point of a metric is
the end of its primary-key range, the best reward one aggregate over the run's coarsest
summaries, the sparkline one level of summaries that holds about ``SPARK_POINTS`` buckets),
so a page of 50 runs reads a few hundred index rows however long the runs are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.metrics import rollups
from app.metrics.models import MetricPoint, MetricRollup
from app.runs.models import Run
from app.runs.progress import progress

SPARK_POINTS = 40
SPARK_W, SPARK_H = 96, 22
# The list's optional columns: key, header, metric read for it (None: from the run record).
COLUMNS = (("reward", "Reward"), ("best", "Best reward"), ("kl", "KL"),
           ("zero_spread", "Zero-spread"), ("steps_per_s", "Steps/s"), ("runtime", "Runtime"),
           ("spark", "Reward trend"))
DEFAULT_HIDDEN = ("zero_spread", "steps_per_s")


@dataclass
class RowNumbers:
    """What a row shows; None where the run never logged the metric (the cell stays empty)."""

    reward: float | None = None
    best: float | None = None
    kl: float | None = None
    zero_spread: float | None = None
    steps_per_s: float | None = None
    runtime_s: float | None = None
    spark: str = ""  # an SVG polyline's points, "" when fewer than two values
    spark_values: list[float] = field(default_factory=list)


def _last_value(db: Session, run_id: int, name: str) -> float | None:
    """The metric's value at its last stored step: one index seek at the end of its range."""
    value = db.scalar(select(MetricPoint.value)
                      .where(MetricPoint.run_id == run_id, MetricPoint.name == name,
                             MetricPoint.value.is_not(None))
                      .order_by(MetricPoint.step.desc()).limit(1))
    return value if value is None or math.isfinite(value) else None


def _best(db: Session, run_id: int) -> float | None:
    return db.scalar(select(func.max(MetricRollup.vmax))
                     .where(MetricRollup.run_id == run_id, MetricRollup.level == 1,
                            MetricRollup.name == "reward"))


def _spark_values(db: Session, run: Run) -> list[float]:
    """Reward means per bucket of the finest summary level that has at most SPARK_POINTS
    buckets (raw points for a short run): the trend, never a sawtooth of minima and maxima."""
    known = rollups.span(db, run.id) if run.current_step > SPARK_POINTS else None
    level = 0
    if known is not None:
        rollups.catch_up(db, run)
        steps = known[1] - known[0] + 1
        level = next((lv for lv in range(1, rollups.LEVELS + 1)
                      if math.ceil(steps / rollups.width(lv)) <= SPARK_POINTS), rollups.LEVELS)
    if level == 0:
        rows = db.scalars(select(MetricPoint.value)
                          .where(MetricPoint.run_id == run.id, MetricPoint.name == "reward",
                                 MetricPoint.value.is_not(None))
                          .order_by(MetricPoint.step).limit(4 * SPARK_POINTS)).all()
        step = max(1, math.ceil(len(rows) / SPARK_POINTS))
        return [v for v in rows[::step] if math.isfinite(v)]
    rows = db.execute(select(MetricRollup.vsum, MetricRollup.n)
                      .where(MetricRollup.run_id == run.id, MetricRollup.level == level,
                             MetricRollup.name == "reward", MetricRollup.n > 0)
                      .order_by(MetricRollup.bucket)).all()
    return [s / n for s, n in rows if s is not None and math.isfinite(s / n)]


def polyline(values: Sequence[float]) -> str:
    """SVG polyline points scaled into SPARK_W x SPARK_H (a flat series is a middle line)."""
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    last = len(values) - 1

    def y(v: float) -> float:
        return SPARK_H / 2 if high == low else (SPARK_H - 2) - (v - low) / (high - low) * (SPARK_H - 4)
    return " ".join(f"{i * SPARK_W / last:.1f},{y(v):.1f}" for i, v in enumerate(values))


def _runtime(run: Run, now: datetime) -> float | None:
    return progress(run, now).elapsed_s


def row_numbers(db: Session, runs: Sequence[Run]) -> dict[int, RowNumbers]:
    """Per shown run, its numbers (see the module docstring for the cost)."""
    now = datetime.now(UTC)
    out: dict[int, RowNumbers] = {}
    for run in runs:
        names = set(run.metric_names or ())
        row = RowNumbers(runtime_s=_runtime(run, now))
        if "reward" in names:
            row.reward = _last_value(db, run.id, "reward")
            row.best = _best(db, run.id)
            row.spark_values = _spark_values(db, run)
            row.spark = polyline(row.spark_values)
        if "kl" in names:
            row.kl = _last_value(db, run.id, "kl")
        if "frac_reward_zero_std" in names:
            row.zero_spread = _last_value(db, run.id, "frac_reward_zero_std")
        if run.seconds_per_step and run.source != "imported":
            row.steps_per_s = 1.0 / run.seconds_per_step
        out[run.id] = row
    return out
