"""Each run-page chart in one sentence (last value, min, max per metric), computed in SQL.

Why: a chart is a picture; a screen-reader user, a phone on a slow link or a text browser
needs the same facts in words. The sentences are read from the coarsest level of the chart
summaries (``app/metrics/rollups.py``: a few rows per metric, 65,536 steps each) plus each
metric's last chunk, so a live page can poll them cheaply however long the run
is (an aggregate over the points themselves read all 2.5M of a 100k-step run)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.charts.panels import PANELS, names_for
from app.core.logged_names import with_logged
from app.metrics import rollups, store, waiting
from app.metrics.models import MetricRollup
from app.metrics.reading import run_logged_names, titled
from app.metrics.series import Series
from app.runs.models import Run


@dataclass(frozen=True)
class MetricFacts:
    name: str
    points: int
    last_step: int
    last: float  # NaN/inf as logged
    low: float | None  # over finite values; None when there are none
    high: float | None


def metric_facts(db: Session, run: Run) -> dict[str, MetricFacts]:
    """Per metric name: point count, last step and value, finite min and max: the settled
    summaries plus the steps still waiting (read first, ``app/metrics/waiting.py``)."""
    pending = waiting.by_name(waiting.rows(db, run))
    run_id = run.id
    stmt = (select(MetricRollup.name, func.sum(MetricRollup.n + MetricRollup.nonfinite),
                   func.max(MetricRollup.last_step), func.min(MetricRollup.vmin),
                   func.max(MetricRollup.vmax))
            .where(MetricRollup.run_id == run_id, MetricRollup.level == rollups.LEVELS)
            .group_by(MetricRollup.name))
    last = store.last_points(db, run_id)
    out = {}
    for name, n, _, low, high in db.execute(stmt):
        if name in last:  # (a settle between the two reads: its counts show on the next poll)
            out[name] = MetricFacts(name, int(n), last[name][0], last[name][1], low, high)
    for name, series in pending.items():
        out[name] = _with_waiting(out.get(name), name, series)
    return dict(sorted(out.items()))


def _with_waiting(facts: MetricFacts | None, name: str, pending: Series) -> MetricFacts:
    """The facts with the waiting points past the settled last step added."""
    after = -1 if facts is None else facts.last_step
    newer = [(s, v) for s, v in zip(pending.steps, pending.values, strict=True) if s > after]
    if not newer:
        assert facts is not None  # a name with waiting points and no facts has newer points
        return facts
    finite = [v for _, v in newer if math.isfinite(v)]
    lows = [x for x in (facts.low if facts else None, min(finite, default=None)) if x is not None]
    highs = [x for x in (facts.high if facts else None, max(finite, default=None))
             if x is not None]
    return MetricFacts(name, (facts.points if facts else 0) + len(newer), int(newer[-1][0]),
                       newer[-1][1], min(lows, default=None), max(highs, default=None))


def number(value: float | None) -> str:
    """Four significant digits, as a person reads a chart's axis; NaN/inf by name."""
    if value is None:
        return "none"
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.4g}"


def sentence(facts: MetricFacts, with_name: bool, logged: Mapping[str, str]) -> str:
    name = f"{with_logged(facts.name, logged)} " if with_name else ""
    return (f"{name}last {number(facts.last)} at step {facts.last_step}, "
            f"min {number(facts.low)}, max {number(facts.high)} ({facts.points} points)")


def chart_summaries(db: Session, run: Run) -> list[dict[str, str]]:
    """[{key, title, text}] for each chart the run page draws, in the page's order."""
    facts = metric_facts(db, run)
    logged = run_logged_names(run.metric_reading)  # the keys renamed metrics were logged as
    out = []
    for panel in PANELS:
        primary, secondary = names_for(panel, sorted(facts))
        names = primary + secondary
        if not names:
            continue
        several = len(names) > 1
        text = "; ".join(sentence(facts[n], several, logged) for n in names)
        out.append({"key": panel.key, "title": titled(panel.title, names, logged),
                    "text": f"{text}."})
    return out
