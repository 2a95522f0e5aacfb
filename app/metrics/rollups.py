"""Multi-resolution summaries of every metric, so a chart reads about as many rows as it draws.

Storage layout (table ``metric_rollups``, one row per run, level, metric and bucket):

* level 0 is the raw points (``metric_points``); level k >= 1 summarises buckets of ``16**k``
  steps (16, 256, 4096, 65536): finite count, sum, min and max, the first and last step seen,
  and the non-finite values (count, first step, one of their kinds: NaN, inf or -inf);
* the primary key (run, level, name, bucket) makes one level of all a run's metrics one index
  range, so the page of a 1M-step run reads ~250 rows per metric at level 3;
* ingest stores a batch as one inbox row per step (``app/metrics/inbox.py``) and widens the
  run's stale step range (``runs.rollups_stale_lo/hi``); ``settle`` spreads the inbox into
  ``metric_points`` and recomputes every level from the one below over that range, when
  something next reads the run (``catch_up``), when it ends, or when the range grows past
  ``SETTLE_EVERY_STEPS``. Recomputing rather than adding keeps it idempotent: a re-sent step
  overwrites its point, and its buckets come out the same.

A chart of a step range picks the finest level that fits its point budget (two points, min and
max, per bucket), so spikes survive at every zoom and NaN/inf keep a marker; zooming in reads
the finer level of the visible range only (``GET /api/runs/{id}/chart``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, select, text
from sqlalchemy.orm import Session

from app.core.db import begin_write
from app.metrics import inbox
from app.metrics.series import Series, downsample, load_series, stored_names
from app.runs.models import Run

FACTOR = 16
LEVELS = 4  # widths 16 .. 65536 steps: a 10M-step run still draws ~150 buckets per metric
# A run nobody reads is settled by its own ingest once its stale range spans this many steps:
# the inbox stays bounded (~100k values for a TRL run) without a reader or the scheduler.
SETTLE_EVERY_STEPS = 4096
_COLUMNS = ("run_id, level, name, bucket, n, vsum, vmin, vmax, first_step, last_step, "
            "nonfinite, nonfinite_step, nonfinite_raw")
_SET = ", ".join(f"{c} = excluded.{c}" for c in (
    "n", "vsum", "vmin", "vmax", "first_step", "last_step", "nonfinite", "nonfinite_step",
    "nonfinite_raw"))
# ``{names}`` is one parameter holding the batch's metric names, so the statement text never
# changes with their number (SQLAlchemy's expanding IN re-rendered it per batch, ~0.5 ms):
# SQLite reads them from a JSON array, PostgreSQL from an array.
_NAMES = {"sqlite": "name IN (SELECT value FROM json_each(:names))",
          "postgresql": "name = ANY(:names)"}
_FROM_POINTS = (
    f"INSERT INTO metric_rollups ({_COLUMNS}) "
    f"SELECT run_id, 1, name, step / {FACTOR}, count(value), sum(value), min(value), max(value), "
    "min(step), max(step), count(*) - count(value), min(CASE WHEN value IS NULL THEN step END), "
    "max(raw) FROM metric_points WHERE run_id = :run AND {names} "
    "AND step BETWEEN :lo AND :hi "
    f"GROUP BY run_id, name, step / {FACTOR} "
    f"ON CONFLICT (run_id, level, name, bucket) DO UPDATE SET {_SET}")
_FROM_LEVEL = (
    f"INSERT INTO metric_rollups ({_COLUMNS}) "
    f"SELECT run_id, :level, name, bucket / {FACTOR}, sum(n), sum(vsum), min(vmin), max(vmax), "
    "min(first_step), max(last_step), sum(nonfinite), min(nonfinite_step), max(nonfinite_raw) "
    "FROM metric_rollups WHERE run_id = :run AND level = :below AND {names} "
    "AND bucket BETWEEN :lo AND :hi "
    f"GROUP BY run_id, name, bucket / {FACTOR} "
    f"ON CONFLICT (run_id, level, name, bucket) DO UPDATE SET {_SET}")
_STATEMENTS = {dialect: (text(_FROM_POINTS.replace("{names}", cond)),
                         text(_FROM_LEVEL.replace("{names}", cond)))
               for dialect, cond in _NAMES.items()}


def width(level: int) -> int:
    return FACTOR ** level


def refresh(db: Session, run_id: int, names: Sequence[str], lo: int, hi: int,
            levels: range = range(1, LEVELS + 1)) -> None:
    """Recompute the buckets of ``levels`` that hold steps ``lo..hi`` of these metrics (all
    metrics when ``names`` is None), each level from the one below."""
    connection = db.connection()
    postgres = connection.dialect.name == "postgresql"
    from_points, from_level = _STATEMENTS["postgresql" if postgres else "sqlite"]
    if names is None:
        names = stored_names(db, run_id)
    if not names:
        return
    listed = sorted({n[:200] for n in names})  # as stored (``ingest._point`` cuts names)
    names_param = listed if postgres else json.dumps(listed)
    for level in levels:
        if level == 1:
            connection.execute(from_points, {
                "run": run_id, "names": names_param, "lo": lo // FACTOR * FACTOR,
                "hi": hi // FACTOR * FACTOR + FACTOR - 1})
            continue
        # buckets of the level below that make up the touched buckets of this level
        lo_b, hi_b = lo // width(level) * FACTOR, hi // width(level) * FACTOR + FACTOR - 1
        connection.execute(from_level, {"run": run_id, "level": level, "below": level - 1,
                                        "names": names_param, "lo": lo_b, "hi": hi_b})


def note_stale(run: Run, lo: int, hi: int) -> None:
    """Widen the run's stale range by a batch's steps: folded into the run-row update the batch
    makes anyway."""
    run.rollups_stale_lo = lo if run.rollups_stale_lo is None else min(run.rollups_stale_lo, lo)
    run.rollups_stale_hi = hi if run.rollups_stale_hi is None else max(run.rollups_stale_hi, hi)


def backlog(run: Run) -> int:
    """Steps in the run's stale range (0 when nothing waits to be settled)."""
    if run.rollups_stale_lo is None:
        return 0
    return (run.rollups_stale_hi or 0) - run.rollups_stale_lo + 1


def settle(db: Session, run: Run) -> None:
    """Spread the run's inbox into its points and recompute its summaries over the stale range.
    The caller holds the run's write lock (ingest, the end report, ``catch_up``) and commits."""
    if run.rollups_stale_lo is None:
        return
    inbox.spread(db, run.id)
    refresh(db, run.id, None, run.rollups_stale_lo, run.rollups_stale_hi or 0)
    run.rollups_stale_lo = run.rollups_stale_hi = None


def catch_up(db: Session, run: Run) -> None:
    """Before anything reads the run's points or summaries: settle them, under the run's row
    lock (ingest holds it too, so no batch slips in between), and commit."""
    if run.rollups_stale_lo is None:
        return
    begin_write(db)
    locked = db.scalars(select(Run).where(Run.id == run.id).with_for_update()
                        .execution_options(populate_existing=True)).one()
    settle(db, locked)
    db.commit()


@dataclass
class ChartData:
    """What a chart draws: per metric a series (two points per bucket above level 0), the level
    read, its bucket width in steps, and the run's last stored step (where a live poll resumes)."""

    series: dict[str, Series]
    level: int
    width: int
    last_step: int


def span(db: Session, run_id: int) -> tuple[int, int] | None:
    """(first, last) stored step of the run, from the coarsest level (a few rows; current once
    ``catch_up`` ran)."""
    row = db.connection().execute(text(
        "SELECT min(first_step), max(last_step) FROM metric_rollups "
        "WHERE run_id = :run AND level = :level"), {"run": run_id, "level": LEVELS}).one()
    return None if row[0] is None else (int(row[0]), int(row[1]))


def pick_level(steps: int, max_points: int) -> int:
    """The finest level whose buckets over ``steps`` steps fit ``max_points`` points."""
    if steps <= max_points:
        return 0
    for level in range(1, LEVELS + 1):
        if 2 * math.ceil(steps / width(level)) <= max_points:
            return level
    return LEVELS


def chart_data(db: Session, run: Run, max_points: int, names: list[str] | None = None,
               x0: int | None = None, x1: int | None = None) -> ChartData:
    """The run's metrics over steps ``x0..x1`` (default: all), at the finest level that fits."""
    catch_up(db, run)
    run_id = run.id
    known = span(db, run_id)
    if known is None:
        return ChartData({}, 0, 1, 0)
    lo = known[0] if x0 is None else max(x0, known[0])
    hi = known[1] if x1 is None else min(x1, known[1])
    level = pick_level(max(hi - lo + 1, 0), max_points)
    if level == 0:
        raw = load_series(db, run_id, names, after=lo - 1, through=hi)
        series = {n: downsample(s, max_points) for n, s in raw.items()}
    else:
        series = _buckets(db, run_id, level, names, lo, hi)
    return ChartData(series, level, width(level), known[1])


def _buckets(db: Session, run_id: int, level: int, names: list[str] | None, lo: int,
             hi: int) -> dict[str, Series]:
    """One point per bucket at its middle step: the mean, with the bucket's min, max and count
    (drawn as a band; a line through alternating extremes would draw a sawtooth that is not in
    the data); a bucket with NaN/inf adds one such value at its first one."""
    query = ("SELECT name, first_step, last_step, n, vsum, vmin, vmax, nonfinite_step, "
             "nonfinite_raw FROM metric_rollups WHERE run_id = :run AND level = :level "
             "AND bucket BETWEEN :lo AND :hi")
    params: dict[str, object] = {"run": run_id, "level": level, "lo": lo // width(level),
                                 "hi": hi // width(level)}
    statement = text(query + " ORDER BY name, bucket")
    if names:
        statement = text(query + " AND name IN :names ORDER BY name, bucket").bindparams(
            bindparam("names", expanding=True))
        params["names"] = names
    out: dict[str, Series] = {}
    for name, first, last, n, vsum, vmin, vmax, bad_step, bad_raw in db.connection().execute(
            statement, params):
        series = out.setdefault(name, Series(lows=[], highs=[], counts=[]))
        points: list[tuple[float, float, float, float, int]] = []
        if vmin is not None and n:
            points.append(((first + max(last, first)) / 2, vsum / n, vmin, vmax, n))
        if bad_step is not None:
            bad = _nonfinite(bad_raw)
            points.append((bad_step, bad, bad, bad, 1))
        for step, mean, low, high, count in sorted(points, key=lambda p: p[0]):
            series.steps.append(step)
            series.values.append(mean)
            series.lows.append(low)  # type: ignore[union-attr]
            series.highs.append(high)  # type: ignore[union-attr]
            series.counts.append(count)  # type: ignore[union-attr]
    return out


def _nonfinite(raw: str | None) -> float:
    try:
        return float(raw) if raw else math.nan
    except ValueError:
        return math.nan
