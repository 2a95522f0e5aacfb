"""What a reader sees of a live run: the settled points and summaries, plus the steps still
waiting in the inbox, merged in memory.

Why: settling (``rollups.settle``) takes the run's write lock, and a page that settled before it
read waited behind the run's batches, and they behind it (the /runs table, which settled every
live run it showed, had p99 2-5 s under 20 reporting runs). The settler
(``app/metrics/settler.py``) now spreads the inbox within a second or so; a reader never takes
the lock, it reads the few waiting steps (at most ``rollups.SETTLE_EVERY_STEPS``) and merges
them, a waiting value winning over a settled one of the same step (a re-sent step).

Order matters: a reader reads the inbox *before* the settled rows. A settle that commits in
between then shows its steps twice (merged by step), never zero times.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from sqlalchemy.orm import Session

from app.metrics import inbox
from app.metrics.names import Row
from app.metrics.series import Series
from app.runs.models import Run


def rows(db: Session, run: Run, after: int = -1, names: Sequence[str] | None = None
         ) -> list[Row]:
    """The run's waiting steps after ``after``, in step order, with only ``names`` when given
    ([] when nothing waits: no query)."""
    if run.rollups_stale_lo is None:
        return []
    return inbox.pending(db, run.id, after, names)


def by_name(waiting: Iterable[Row], names: Iterable[str] | None = None,
            through: int | None = None) -> dict[str, Series]:
    """Waiting rows as per-name series in step order (only ``names`` when given)."""
    wanted = set(names) if names else None
    out: dict[str, Series] = {}
    for step, metrics in waiting:
        if through is not None and step > through:
            break
        for name, value in metrics.items():
            if wanted is None or name in wanted:
                series = out.setdefault(name, Series())
                series.steps.append(step)
                series.values.append(value)
    return out


def merge(settled: dict[str, Series], waiting: dict[str, Series]) -> dict[str, Series]:
    """Raw series with the waiting points merged in, by step (the waiting value wins)."""
    out = dict(settled)
    for name, extra in waiting.items():
        base = out.get(name)
        if base is None or not base.steps:
            out[name] = extra
        elif extra.steps[0] > base.steps[-1]:  # the usual case: newer steps, appended
            out[name] = Series(steps=[*base.steps, *extra.steps],
                               values=[*base.values, *extra.values])
        else:
            points = dict(zip(base.steps, base.values, strict=True))
            points.update(zip(extra.steps, extra.values, strict=True))
            ordered = sorted(points.items())
            out[name] = Series(steps=[s for s, _ in ordered], values=[v for _, v in ordered])
    return dict(sorted(out.items()))


def merge_buckets(settled: dict[str, Series], waiting: dict[str, Series], width: int,
                  last_settled: dict[str, int]) -> dict[str, Series]:
    """Summarised series (one point per bucket of ``width`` steps) with the waiting steps past
    each series' last settled step (``last_settled``, by name) folded into buckets of their
    own, or into the last settled one where it is the same bucket. A re-sent step inside the
    settled range shows once it is settled (a second or so later); until then its bucket
    counts it once, with its old value."""
    out = dict(settled)
    for name, extra in waiting.items():
        base = out.get(name) or Series(lows=[], highs=[], counts=[])
        out[name] = _fold(base, extra, width, last_settled.get(name, -math.inf))
    return dict(sorted(out.items()))


def _fold(base: Series, extra: Series, width: int, last: float) -> Series:
    """``base`` plus ``extra``'s points after ``last`` (the last settled step), bucketed (finite values as mean/min/max/count,
    a NaN/inf as a point of its own, as ``rollups._buckets`` draws them)."""
    out = Series(steps=list(base.steps), values=list(base.values), lows=list(base.lows or ()),
                 highs=list(base.highs or ()), counts=list(base.counts or ()))
    lows, highs, counts = out.lows, out.highs, out.counts
    assert lows is not None and highs is not None and counts is not None
    for step, value in zip(extra.steps, extra.values, strict=True):
        if step <= last:
            continue
        at = _open_bucket(out, step, width) if math.isfinite(value) else None
        if at is None:  # a bucket of its own (or a NaN/inf point)
            out.steps.append(step)
            out.values.append(value)
            lows.append(value)
            highs.append(value)
            counts.append(1)
            continue
        n = counts[at]
        out.values[at] = (out.values[at] * n + value) / (n + 1)
        lows[at], highs[at], counts[at] = min(lows[at], value), max(highs[at], value), n + 1
    return out


def _open_bucket(series: Series, step: int, width: int) -> int | None:
    """Index of the series' last finite point when its bucket is the one ``step`` falls in."""
    counts = series.counts or []
    for at in range(len(series.steps) - 1, -1, -1):
        if int(series.steps[at]) // width != step // width:
            return None
        if math.isfinite(series.values[at]):
            return at if counts[at] else None
    return None
