"""What a live run page's chart poll compares: the charts' shape, and the findings they shade.

A polled charts panel answers 204 while both are unchanged; new points never change them (the
page appends those itself, ``GET /api/runs/{id}/metrics?after=N``). A finding opened, resolved
or raised in severity used to rebuild every chart of the page (~50 ms of server per poll for a
1k-step run, re-reading every point): a noisy run whose findings came and went had its page
re-read every two seconds (bench/load.py: 83 % of chart polls). Now only the marks travel then,
a few hundred bytes that static/charts.js lays over the drawn charts. The system charts draw
steps on a wall clock (``app/charts/wall_clock.py``), so their marks still rebuild.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.charts.figures import mark_layout, marks_by_panel
from app.charts.panels import monitor_only, panels_for
from app.health.models import FindingRecord
from app.runs.models import Run


@dataclass(frozen=True)
class ChartVersions:
    """``shape``: status, metric names and the marks of the clock charts (a rebuild);
    ``marks``: the other charts' marks (a relayout). Each a short digest."""

    shape: str
    marks: str


def chart_marks(run: Run, findings: Sequence[FindingRecord]) -> dict[str, list[dict[str, Any]]]:
    """Per chart key, the step ranges its active findings shade."""
    return marks_by_panel([f.to_dict() for f in findings if f.active], monitor_only(run.spec))


def _clock_keys(run: Run) -> frozenset[str]:
    return frozenset(p.key for p in panels_for(monitor_only(run.spec)) if p.group == "system")


def _digest(value: object) -> str:
    return hashlib.sha1(repr(value).encode()).hexdigest()[:16]


def versions(run: Run, marks: dict[str, list[dict[str, Any]]]) -> ChartVersions:
    """Where a mark starts, its finding and severity; not where it ends (an open finding's
    range grows with every step: the page stretches it)."""
    clock = _clock_keys(run)
    starts = sorted((key, m["label"], m["severity"], m["x0"])
                    for key, ms in marks.items() for m in ms)
    return ChartVersions(
        shape=_digest((run.status, run.metric_names, [s for s in starts if s[0] in clock])),
        marks=_digest([s for s in starts if s[0] not in clock]))


def marks_payload(run: Run, marks: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per step-axis chart key with marks, its layout ``shapes`` and ``annotations`` (a chart
    missing here has none left)."""
    clock = _clock_keys(run)
    return {key: mark_layout(ms) for key, ms in marks.items() if key not in clock}
