"""Summaries of a metric's points over buckets of steps, computed with numpy from the decoded
chunks: the chart's finest summary level on the fly, and the stored level the coarser ones
are built from.

Why from the points: they are compressed chunks (``chunks.py``) the database cannot read, and
numpy's segment reductions over a chunk take microseconds. Level 1 (16 steps) is not stored:
its rows were 94 % of ``metric_rollups`` (18 of ~27 bytes a point on PostgreSQL, issue 57),
and a chart draws level 1 only for ranges of a few thousand steps, whose points decode in a
few milliseconds. Level 2 is computed here and stored; levels 3 and 4 are built from it in SQL
(``rollups.refresh``). Stored rows travel as one JSON parameter the database splits (as
``inbox.write`` does), not one bound row each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.metrics.chunks import Points
from app.metrics.series import Series

# max(raw) of a bucket's non-finite values, as SQL compares their texts: "nan" > "inf" > "-inf"
KINDS = (None, "-inf", "inf", "nan")
_VALUES = (np.nan, -np.inf, np.inf, np.nan)

COLUMNS = ("run_id, level, name, bucket, n, vsum, vmin, vmax, first_step, last_step, "
           "nonfinite, nonfinite_step, nonfinite_raw")
SET = ", ".join(f"{c} = excluded.{c}" for c in (
    "n", "vsum", "vmin", "vmax", "first_step", "last_step", "nonfinite", "nonfinite_step",
    "nonfinite_raw"))
_UPSERT = {
    "sqlite": text(
        f"INSERT INTO metric_rollups ({COLUMNS}) SELECT :run, :level, "
        + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(11))
        + " FROM json_each(:rows) WHERE true ON CONFLICT (run_id, level, name, bucket) "
        f"DO UPDATE SET {SET}"),
    "postgresql": text(
        f"INSERT INTO metric_rollups ({COLUMNS}) SELECT :run, :level, r->>0, (r->>1)::int, "
        "(r->>2)::int, (r->>3)::float8, (r->>4)::float8, (r->>5)::float8, (r->>6)::int, "
        "(r->>7)::int, (r->>8)::int, (r->>9)::int, r->>10 "
        "FROM json_array_elements(CAST(:rows AS json)) r "
        f"ON CONFLICT (run_id, level, name, bucket) DO UPDATE SET {SET}"),
}


@dataclass
class Stats:
    """Per bucket holding points (arrays, bucket order): its index, finite count, sum, min and
    max (over finite values), first and last step, non-finite count, first non-finite step
    and kind (an index into ``KINDS``)."""

    bucket: np.ndarray
    n: np.ndarray
    vsum: np.ndarray
    vmin: np.ndarray
    vmax: np.ndarray
    first: np.ndarray
    last: np.ndarray
    bad: np.ndarray
    bad_step: np.ndarray
    kind: np.ndarray


def stats(points: Points, width: int) -> Stats:
    """The points (ascending steps) summarised over buckets of ``width`` steps."""
    steps, values = points
    if not steps.size:
        return Stats(*(np.empty(0, np.int64),) * 10)
    buckets = steps // width
    start = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    end = np.r_[start[1:], steps.size] - 1
    finite = np.isfinite(values)
    n = np.add.reduceat(finite.astype(np.int64), start)
    kind = np.where(finite, 0, np.where(np.isnan(values), 3, np.where(values > 0, 2, 1)))
    return Stats(
        bucket=buckets[start], n=n,
        vsum=np.add.reduceat(np.where(finite, values, 0.0), start),
        vmin=np.minimum.reduceat(np.where(finite, values, np.inf), start),
        vmax=np.maximum.reduceat(np.where(finite, values, -np.inf), start),
        first=steps[start], last=steps[end], bad=(end - start + 1) - n,
        bad_step=np.minimum.reduceat(np.where(finite, np.iinfo(np.int64).max, steps), start),
        kind=np.maximum.reduceat(kind, start))


def rows(name: str, s: Stats) -> list[list[object]]:
    """``s`` as ``metric_rollups`` rows (without run and level): None where SQL's aggregates
    of no value are NULL."""
    columns = zip(s.bucket.tolist(), s.n.tolist(), s.vsum.tolist(), s.vmin.tolist(),
                  s.vmax.tolist(), s.first.tolist(), s.last.tolist(), s.bad.tolist(),
                  s.bad_step.tolist(), s.kind.tolist(), strict=True)
    return [[name, bucket, some, total if some else None, low if some else None,
             high if some else None, first, last, bad, at if bad else None, KINDS[kind]]
            for bucket, some, total, low, high, first, last, bad, at, kind in columns]


def write(db: Session, run_id: int, level: int, rows_: list[list[object]]) -> None:
    """Upsert rows of one summary level of a run."""
    if not rows_:
        return
    connection = db.connection()
    dialect = "postgresql" if connection.dialect.name == "postgresql" else "sqlite"
    connection.execute(_UPSERT[dialect], {"run": run_id, "level": level,
                                          "rows": orjson.dumps(rows_).decode()})


def drawn(s: Stats) -> Series:
    """What a chart draws of the buckets: per bucket with finite values one point at its middle
    step (mean, with min, max and count: a band), and one point at its first NaN/inf, in step
    order, as ``rollups._buckets`` draws the stored levels."""
    points: list[tuple[float, float, float, float, int]] = []
    some = s.n > 0
    mean = np.divide(s.vsum, s.n, out=np.zeros_like(s.vsum, dtype=np.float64), where=some)
    middle = (s.first + np.maximum(s.last, s.first)) / 2
    points.extend(zip(middle[some].tolist(), mean[some].tolist(), s.vmin[some].tolist(),
                      s.vmax[some].tolist(), s.n[some].tolist(), strict=True))
    bad = s.bad > 0
    for step, kind in zip(s.bad_step[bad].tolist(), s.kind[bad].tolist(), strict=True):
        value = _VALUES[kind]
        points.append((step, value, value, value, 1))
    points.sort(key=lambda p: p[0])
    return Series(steps=[p[0] for p in points], values=[p[1] for p in points],
                  lows=[p[2] for p in points], highs=[p[3] for p in points],
                  counts=[p[4] for p in points])
