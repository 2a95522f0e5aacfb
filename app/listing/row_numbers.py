"""The numbers of each row of the runs list: last and best reward, KL, zero-spread share,
steps per second, runtime, and a reward sparkline.

Why here and not in the page query: the list's page query stays three queries whatever it
shows; these numbers cost a few keyed lookups per shown run (the last finite value of a metric
is its last chunk's ``last_finite``, the best reward one aggregate over the run's finest stored
summaries, the sparkline one level of summaries that holds about ``SPARK_POINTS`` buckets):
one statement for the page's numbers and one per run for its sparkline. A live run's steps
still waiting in the inbox are read first and merged (``app/metrics/waiting.py``): the list
never takes a run's write lock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from app.metrics import bucket_stats, rollups, store, waiting
from app.metrics.names import Row
from app.runs.models import Run
from app.runs.progress import progress

SPARK_POINTS = 40
SHOWN = ("reward", "kl", "frac_reward_zero_std")  # the metrics a row's numbers read
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


def _last(name: str) -> str:
    """The metric's last finite value: one index seek back from its last chunk."""
    return store.last_finite_sql(name)


# One statement for the whole page (text, built once: composing SQLAlchemy expressions per run
# cost more than running them).
_NUMBERS = text(
    f"SELECT runs.id, {_last('reward')}, {_last('kl')}, {_last('frac_reward_zero_std')}, "
    "(SELECT max(vmax) FROM metric_rollups WHERE run_id = runs.id "
    f"AND level = {rollups.STORED_FROM} "
    "AND name = 'reward') FROM runs WHERE runs.id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_SPARK_LEVEL = text("SELECT vsum, n FROM metric_rollups WHERE run_id = :run AND level = :level "
                    "AND name = 'reward' AND n > 0 ORDER BY bucket")


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _newest(pending: Sequence[Row]) -> dict[str, float]:
    """Per metric, its last finite value among the waiting steps (newer than any settled)."""
    out: dict[str, float] = {}
    for _, metrics in pending:
        out.update((k, v) for k, v in metrics.items() if math.isfinite(v))
    return out


def _best(settled: float | None, pending: Sequence[Row]) -> float | None:
    rewards = [m["reward"] for _, m in pending if math.isfinite(m.get("reward", math.nan))]
    return _finite(max([*rewards, *([settled] if settled is not None else [])], default=None))


def _spark_values(db: Session, run: Run, pending: Sequence[Row]) -> list[float]:
    """Reward means per bucket of the finest summary level that has at most SPARK_POINTS
    buckets (raw points for a short run): the trend, never a sawtooth of minima and maxima.
    A short run's raw points include its waiting steps; a long run's trend shows them once
    settled (a second or so later)."""
    known = rollups.span(db, run.id) if run.current_step > SPARK_POINTS else None
    level = 0
    if known is not None:
        steps = known[1] - known[0] + 1
        level = next((lv for lv in range(1, rollups.LEVELS + 1)
                      if math.ceil(steps / rollups.width(lv)) <= SPARK_POINTS), rollups.LEVELS)
    connection = db.connection()
    if level == 0:
        values = _raw_rewards(_first_rewards(db, run.id, 4 * SPARK_POINTS), pending)
        step = max(1, math.ceil(len(values) / SPARK_POINTS))
        return [v for v in values[::step] if math.isfinite(v)]
    if level < rollups.STORED_FROM:  # not stored: from the points
        rewards = store.read(db, run.id, ["reward"]).get("reward", store.EMPTY)
        summary = bucket_stats.stats(rewards, rollups.width(level))
        some = summary.n > 0
        rows = list(zip(summary.vsum[some].tolist(), summary.n[some].tolist(), strict=True))
    else:
        rows = connection.execute(_SPARK_LEVEL, {"run": run.id, "level": level}).all()
    return [s / n for s, n in rows if s is not None and math.isfinite(s / n)]


def _first_rewards(db: Session, run_id: int, limit: int) -> list[tuple[int, float]]:
    """The run's first ``limit`` settled finite rewards as (step, value)."""
    steps, values = store.read(db, run_id, ["reward"]).get("reward", store.EMPTY)
    finite = np.isfinite(values)
    return list(zip(steps[finite][:limit].tolist(), values[finite][:limit].tolist(), strict=True))


def _raw_rewards(settled: Sequence[tuple[int, float]], pending: Sequence[Row]) -> list[float]:
    """The first ``4 * SPARK_POINTS`` rewards by step, settled and waiting (waiting wins)."""
    points = dict(settled)
    points.update((step, m["reward"]) for step, m in pending if "reward" in m)
    return [points[step] for step in sorted(points)[:4 * SPARK_POINTS]]


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
    pending = {run.id: waiting.rows(db, run, names=SHOWN) for run in runs}  # before settled
    with_metrics = [r.id for r in runs if r.metric_names]
    found = {row[0]: row[1:] for row in db.connection().execute(
        _NUMBERS, {"ids": with_metrics})} if with_metrics else {}
    out: dict[int, RowNumbers] = {}
    for run in runs:
        reward, kl, zero_spread, best = found.get(run.id, (None, None, None, None))
        newest = _newest(pending[run.id])
        row = RowNumbers(reward=_finite(newest.get("reward", reward)),
                         best=_best(best, pending[run.id]), kl=_finite(newest.get("kl", kl)),
                         zero_spread=_finite(newest.get("frac_reward_zero_std", zero_spread)),
                         runtime_s=_runtime(run, now))
        if "reward" in (run.metric_names or ()):
            row.spark_values = _spark_values(db, run, pending[run.id])
            row.spark = polyline(row.spark_values)
        if run.seconds_per_step and run.source != "imported":
            row.steps_per_s = 1.0 / run.seconds_per_step
        out[run.id] = row
    return out
