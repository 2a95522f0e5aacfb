"""Multi-resolution summaries of every metric, so a chart reads about as many rows as it draws.

Storage layout (table ``metric_rollups``, one row per run, level, metric and bucket):

* level 0 is the raw points (``metric_chunks``, ``app/metrics/store.py``); level k >= 1
  summarises buckets of ``16**k`` steps (16, 256, 4096, 65536): finite count, sum, min and
  max, the first and last step seen, and the non-finite values (count, first step, one of
  their kinds: NaN, inf or -inf). Level 1 is computed from the points when a chart draws it
  (``bucket_stats``), never stored: its rows were most of the table (issue 57);
* the primary key (run, level, name, bucket) makes one level of all a run's metrics one index
  range, so the page of a 1M-step run reads ~250 rows per metric at level 3;
* ingest stores a batch as one inbox row per step (``app/metrics/inbox.py``) and widens the
  run's stale step range (``runs.rollups_stale_lo/hi``); ``settle`` spreads the inbox into
  the points' chunks and recomputes the stored levels over that range: the settler
  (``app/metrics/settler.py``) within a second or so, the end report, or ingest itself once the
  range grows past ``SETTLE_EVERY_STEPS``. Readers never settle: they merge the steps still
  waiting in memory (``app/metrics/waiting.py``). Recomputing rather than adding keeps it
  idempotent: a re-sent step overwrites its point, and its buckets come out the same.

A chart of a step range picks the finest level that fits its point budget (two points, min and
max, per bucket), so spikes survive at every zoom and NaN/inf keep a marker; zooming in reads
the finer level of the visible range only (``GET /api/runs/{id}/chart``).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, select, text
from sqlalchemy.orm import Session

from app.core.db import begin_write
from app.metrics import bucket_stats, inbox, store, waiting
from app.metrics.chunks import CHUNK_STEPS, Points
from app.metrics.series import Series, downsample, load_series
from app.runs.models import Run

FACTOR = 16
LEVELS = 4  # widths 16 .. 65536 steps: a 10M-step run still draws ~150 buckets per metric
# A run nobody reads is settled by its own ingest once its stale range spans this many steps:
# the inbox stays bounded (~100k values for a TRL run) without a reader or the scheduler.
SETTLE_EVERY_STEPS = 4096
BUCKET_WEIGHT = 4  # raw points of page one drawn bucket weighs (``merge_factor``)
_COLUMNS, _SET = bucket_stats.COLUMNS, bucket_stats.SET
STORED_FROM = 2  # the finest level stored; level 1 is computed from the points when drawn
# a chunk holds whole buckets of that level, so the chunks a settle wrote hold every bucket it changed
assert CHUNK_STEPS % FACTOR ** STORED_FROM == 0
# ``{names}`` is one parameter holding the batch's metric names, so the statement text never
# changes with their number (SQLAlchemy's expanding IN re-rendered it per batch, ~0.5 ms):
# SQLite reads them from a JSON array, PostgreSQL from an array.
_NAMES = {"sqlite": "name IN (SELECT value FROM json_each(:names))",
          "postgresql": "name = ANY(:names)"}
_FROM_LEVEL = (
    f"INSERT INTO metric_rollups ({_COLUMNS}) "
    f"SELECT run_id, :level, name, bucket / {FACTOR}, sum(n), sum(vsum), min(vmin), max(vmax), "
    "min(first_step), max(last_step), sum(nonfinite), min(nonfinite_step), max(nonfinite_raw) "
    "FROM metric_rollups WHERE run_id = :run AND level = :below AND {names} "
    "AND bucket BETWEEN :lo AND :hi "
    f"GROUP BY run_id, name, bucket / {FACTOR} "
    f"ON CONFLICT (run_id, level, name, bucket) DO UPDATE SET {_SET}")
_STATEMENTS = {dialect: text(_FROM_LEVEL.replace("{names}", cond))
               for dialect, cond in _NAMES.items()}


def width(level: int) -> int:
    return FACTOR ** level


def refresh(db: Session, run_id: int, names: Sequence[str] | None, lo: int, hi: int,
            written: dict[str, Points] | None = None) -> None:
    """Recompute the stored buckets that hold steps ``lo..hi`` of these metrics (all metrics
    when ``names`` is None): level ``STORED_FROM`` from the points, each level above from the
    one below. Level 1 is never stored (``bucket_stats``: computed when drawn). ``written``:
    the points of the chunks the settle just wrote, whole (``store.write``), which hold every
    changed bucket of level ``STORED_FROM``: summarised as they are, not read back."""
    connection = db.connection()
    postgres = connection.dialect.name == "postgresql"
    from_level = _STATEMENTS["postgresql" if postgres else "sqlite"]
    if names is None:
        names = store.run_names(db, run_id)
    if not names:
        return
    listed = sorted({n[:200] for n in names})  # as stored (``inbox.storable`` cuts names)
    names_param = listed if postgres else json.dumps(listed)
    base = width(STORED_FROM)  # from the points, decoded: the database cannot read a chunk
    settled = written if written is not None else store.read(
        db, run_id, listed, lo // base * base - 1, hi // base * base + base - 1)
    bucket_stats.write(db, run_id, STORED_FROM, [
        row for name, points in settled.items()
        for row in bucket_stats.rows(name, bucket_stats.stats(points, base))])
    for level in range(STORED_FROM + 1, LEVELS + 1):
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
    The caller holds the run's write lock (ingest, the end report, the settler) and commits."""
    if run.rollups_stale_lo is None:
        return
    written = inbox.spread(db, run.id)
    refresh(db, run.id, None, run.rollups_stale_lo, run.rollups_stale_hi or 0, written)
    run.rollups_stale_lo = run.rollups_stale_hi = None


def catch_up(db: Session, run: Run) -> None:
    """Settle the run now, under its row lock (ingest holds it too, so no batch slips in
    between), and commit: what the settler does, for a caller that must see the points table
    itself settled (tests, the downgrade). Never on a read path: that waits for writers."""
    if run.rollups_stale_lo is None:
        return
    begin_write(db)
    locked = db.scalars(select(Run).where(Run.id == run.id).with_for_update()
                        .execution_options(populate_existing=True)).one()
    settle(db, locked)
    db.commit()


@dataclass
class ChartData:
    """What a chart draws: per metric a series (one point per drawn bucket above level 0), the level
    read, its drawn bucket width in steps, and the run's last stored step (where a live poll resumes)."""

    series: dict[str, Series]
    level: int
    width: int
    last_step: int


def span(db: Session, run_id: int) -> tuple[int, int] | None:
    """(first, last) settled step of the run, from the coarsest level (a few rows)."""
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


def merge_factor(steps: int, level: int, max_points: int) -> int:
    """How many neighbouring buckets of ``level`` one drawn bucket joins, so that the buckets
    over ``steps`` weigh no more than ``max_points`` raw points on the page.

    A bucket is drawn as three points (its min, max and mean, ``app/charts/figures.py``) and
    carries its count: about ``BUCKET_WEIGHT`` raw points of page. ``pick_level`` counts two per
    bucket, so just past a level's switch point a run drew up to ``max_points / 2`` buckets: a
    10k-step page (625 buckets of 16 steps) weighed 1.4 MB, more than a 100k-step one (391 of
    256). Joining at most two of them keeps every run's page within the same weight."""
    if level == 0:
        return 1
    buckets = math.ceil(steps / width(level))
    return max(1, math.ceil(buckets * BUCKET_WEIGHT / max_points))


def chart_data(db: Session, run: Run, max_points: int, names: list[str] | None = None,
               x0: int | None = None, x1: int | None = None) -> ChartData:
    """The run's metrics over steps ``x0..x1`` (default: all), at the finest level that fits:
    the settled summaries plus the steps still waiting (``waiting``), without the run's lock."""
    with _CHART_READS:
        return _chart_data(db, run, max_points, names, x0, x1)


# Chart reads of one process at once. A page of a 1k-step run reads ~30k points: twenty tabs
# opening pages together crowded the one interpreter, and a batch holding SQLite's write lock
# waited for the GIL behind them (bench/load.py: ingest p99 1-2 s). The others queue here,
# asleep, so ingest never waits for readers.
CHART_READS_AT_ONCE = 2
_CHART_READS = threading.BoundedSemaphore(CHART_READS_AT_ONCE)


def _chart_data(db: Session, run: Run, max_points: int, names: list[str] | None = None,
                x0: int | None = None, x1: int | None = None) -> ChartData:
    run_id = run.id
    pending = waiting.by_name(waiting.rows(db, run, -1 if x0 is None else x0 - 1), names, x1)
    known = _with_waiting(span(db, run_id), pending)
    if known is None:
        return ChartData({}, 0, 1, 0)
    lo = known[0] if x0 is None else max(x0, known[0])
    hi = known[1] if x1 is None else min(x1, known[1])
    level = pick_level(max(hi - lo + 1, 0), max_points)
    drawn = width(level) * merge_factor(max(hi - lo + 1, 0), level, max_points)
    if level == 0:
        raw = waiting.merge(load_series(db, run_id, names, after=lo - 1, through=hi), pending)
        series = {n: downsample(s, max_points) for n, s in raw.items()}
    else:
        settled, last = _buckets(db, run_id, level, names, lo, hi, drawn // width(level))
        series = waiting.merge_buckets(settled, pending, drawn, last)
    return ChartData(series, level, drawn, known[1])


def _with_waiting(known: tuple[int, int] | None,
                  pending: dict[str, Series]) -> tuple[int, int] | None:
    """The settled (first, last) step widened by the waiting steps."""
    steps = [s for series in pending.values() for s in (series.steps[0], series.steps[-1])]
    if not steps:
        return known
    lo, hi = int(min(steps)), int(max(steps))
    return (lo, hi) if known is None else (min(lo, known[0]), max(hi, known[1]))


def _buckets(db: Session, run_id: int, level: int, names: list[str] | None, lo: int,
             hi: int, merge: int = 1) -> tuple[dict[str, Series], dict[str, int]]:
    """One point per bucket at its middle step: the mean, with the bucket's min, max and count
    (drawn as a band; a line through alternating extremes would draw a sawtooth that is not in
    the data); a bucket with NaN/inf adds one such value at its first one. ``merge`` stored
    buckets are joined into one (aligned to multiples of ``merge``, the same at every zoom).
    Below the stored levels the buckets are computed from the points. Also returns, per
    metric, the last settled step read (a waiting step at or before it is a re-send its
    bucket already counts: ``waiting.merge_buckets``)."""
    if level < STORED_FROM:
        wide = width(level) * merge
        points = store.read(db, run_id, names, lo // wide * wide - 1, hi // wide * wide + wide - 1)
        return ({name: bucket_stats.drawn(bucket_stats.stats(p, wide))
                 for name, p in points.items()},
                {name: int(p[0][-1]) for name, p in points.items()})
    query = ("SELECT name, min(first_step), max(last_step), sum(n), sum(vsum), min(vmin), "
             "max(vmax), min(nonfinite_step), max(nonfinite_raw) FROM metric_rollups "
             "WHERE run_id = :run AND level = :level AND bucket BETWEEN :lo AND :hi")
    grouped = " GROUP BY name, bucket / :merge ORDER BY name, min(bucket)"
    params: dict[str, object] = {"run": run_id, "level": level, "lo": lo // width(level),
                                 "hi": hi // width(level), "merge": merge}
    statement = text(query + grouped)
    if names:
        statement = text(query + " AND name IN :names" + grouped).bindparams(
            bindparam("names", expanding=True))
        params["names"] = names
    out: dict[str, Series] = {}
    lasts: dict[str, int] = {}
    for name, first, last, n, vsum, vmin, vmax, bad_step, bad_raw in db.connection().execute(
            statement, params):
        series = out.setdefault(name, Series(lows=[], highs=[], counts=[]))
        lasts[name] = max(lasts.get(name, last), last)
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
    return out, lasts


def _nonfinite(raw: str | None) -> float:
    try:
        return float(raw) if raw else math.nan
    except ValueError:
        return math.nan
