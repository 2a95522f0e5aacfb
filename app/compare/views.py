"""The compare page (`/runs/compare?ids=1,2,3`): chosen metrics of several runs overlaid on
shared charts aligned by step, each run's verdict and findings side by side, and the spec
fields that differ. The URL holds the selection, so a comparison can be shared.

Each run's series are read as the run page reads them (``rollups.chart_data`` with the same
``chart_max_points`` budget): raw points while a run is short, else the min and max of each
bucket of the finest summary level that fits, so a request reads about as many rows as it draws
whatever the runs' length, and spikes and NaN/inf (a red marker, as on the run page) stay visible.

While any compared run is queued or running, the run cards and the charts are re-rendered as a
fragment (``/runs/compare/_live``) every few seconds; static/app.js redraws the charts in place,
so the reader's zoom and hidden legend entries survive. The fragment of a comparison with no
live run carries no polling trigger: polling stops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select

from app.charts.figures import (
    BAND_HOVER,
    NONFINITE_AXIS,
    PLAIN_LAYOUT,
    RAW_HOVER,
    nonfinite_kind,
    nonfinite_trace,
    plot_text,
)
from app.compare.spec_diff import spec_differences
from app.compare.view_settings import ViewSettings, parse_view
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.logged_names import with_logged
from app.core.templating import templates
from app.health.api import sort_findings
from app.health.service import findings_for
from app.metrics.reading import Reading
from app.metrics.rollups import chart_data
from app.metrics.series import Series
from app.runs.lifecycle import is_live
from app.runs.models import Run
from app.runs.progress import progress
from app.runs.service import storable_id

router = APIRouter(include_in_schema=False)

MIN_RUNS, MAX_RUNS = 2, 8
MAX_METRICS = 12
DEFAULT_METRICS = ("reward", "reward_std", "frac_reward_zero_std", "kl", "entropy",
                   "completions/mean_length")
# One colour per run, the same on every chart (plotly's default cycle, colour-blind friendly
# enough for 8 lines; the legend names each run).
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f")
STOP_POLLING = 286  # htmx: swap this answer, then cancel the element's polling
GONE = ('<section class="compare-runs" id="compare-runs"><p class="empty">{why}: '
        '<a href="/runs">back to the runs</a></p></section>')
REFRESH_SECONDS = 5  # up to 8 runs x 12 metrics per poll: slower than the run page's panels


def parse_ids(values: Sequence[str]) -> list[int]:
    """``ids=1,2,3`` or ``ids=1&ids=2`` (the list's checkboxes) -> [1, 2, 3], order kept,
    duplicates dropped; a clear 400 for anything else."""
    ids: list[int] = []
    for part in (p.strip() for v in values for p in v.split(",")):
        if not part:
            continue
        if not part.isdigit() or not storable_id(int(part)):
            raise HTTPException(400, f"ids must be run ids separated by commas, not {part[:20]!r}")
        if int(part) not in ids:
            ids.append(int(part))
    if not MIN_RUNS <= len(ids) <= MAX_RUNS:
        raise HTTPException(400, f"pick {MIN_RUNS} to {MAX_RUNS} runs to compare "
                                 f"(got {len(ids)}): tick them on /runs")
    return ids


def load_runs(db: SessionDep, ids: list[int]) -> list[Run]:
    found = {r.id: r for r in db.scalars(select(Run).where(Run.id.in_(ids)))}
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise HTTPException(404, f"run(s) {', '.join(missing)} not found")
    return [found[i] for i in ids]


def choose_metrics(runs: Sequence[Run], asked: Sequence[str]) -> tuple[list[str], list[str]]:
    """(available, chosen): every metric any run logged, and the ones to draw (the asked ones
    that exist, else the GRPO defaults that exist)."""
    available = sorted({n for r in runs for n in (r.metric_names or [])})
    wanted = [m for m in asked if m in available] if asked else []
    chosen = wanted or [m for m in DEFAULT_METRICS if m in available]
    return available, chosen[:MAX_METRICS]


def overlay(metric: str, runs: Sequence[Run], series: dict[int, dict[str, Series]],
            logged: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One chart: this metric of every run that logged it, one colour per run; NaN/inf are gaps
    in the lines and red markers on a hidden axis (as on the run page). Each trace has a
    ``uid`` so a redraw keeps the legend entries the reader hid (``uirevision``)."""
    data = []
    bad: list[tuple[str, int, str]] = []
    for i, run in enumerate(runs):
        s = series[run.id].get(metric)
        if s is None:
            continue
        label = plot_text(f"#{run.id} {run.name}")
        color = COLORS[i % len(COLORS)]
        data += band(run.id, label, color, s)
        data.append({"type": "scatter", "mode": "lines", "name": label, "uid": f"run-{run.id}",
                     "x": s.steps, "y": [v if math.isfinite(v) else None for v in s.values],
                     "line": {"color": color, "width": 1.6}, "legendgroup": label,
                     "meta": run.id,
                     "hovertemplate": BAND_HOVER if s.summarised else RAW_HOVER,
                     "customdata": _band_data(s)})
        bad += [(f"#{run.id} {run.name}", step, nonfinite_kind(v))  # escaped by the trace
                for step, v in zip(s.steps, s.values, strict=True) if not math.isfinite(v)]
    title = with_logged(metric, logged or {})  # learning_rate (lr): the key a run logged
    layout = {**PLAIN_LAYOUT, "title": {"text": plot_text(title), "font": {"size": 14},
                                        "x": 0.02,
                                        "xanchor": "left"},
              # room for the title above, and below for the legend under the "step" title
              # (at y -0.3 without an anchor the legend sat on that title)
              "margin": {**PLAIN_LAYOUT["margin"], "t": 36, "b": 76}, "height": 300,
              "hovermode": "x unified",
              "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.26,
                         "yanchor": "top", "font": {"size": 10}}}
    if bad:
        data.append({**nonfinite_trace(sorted(bad, key=lambda p: p[1])), "uid": "nonfinite"})
        layout["yaxis3"] = NONFINITE_AXIS
    return {"data": data, "layout": layout}


def band(run_id: int, label: str, color: str, s: Series) -> list[dict[str, Any]]:
    """A summarised run's min-max band (two edges, the upper filled), under its mean line and
    hidden with it (one legend group); none for raw points."""
    if not s.summarised:
        return []
    edge = {"type": "scatter", "mode": "lines", "line": {"width": 0}, "x": s.steps,
            "legendgroup": label, "showlegend": False, "hoverinfo": "skip",
            "meta": f"band-{run_id}", "name": f"{label} min-max"}
    fill = "rgba({},{},{},0.15)".format(*(int(color[k:k + 2], 16) for k in (1, 3, 5)))
    return [{**edge, "uid": f"run-{run_id}-min", "y": _finite(s.lows or [])},
            {**edge, "uid": f"run-{run_id}-max", "y": _finite(s.highs or []), "fill": "tonexty",
             "fillcolor": fill}]


def _finite(values: Sequence[float]) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in values]


def _band_data(s: Series) -> list[list[float | int | None]] | None:
    """Per point [min, max, steps] for a summary's tooltip."""
    if not s.summarised:
        return None
    return [[lo, hi, n] for lo, hi, n in zip(_finite(s.lows or []), _finite(s.highs or []),
                                             s.counts or [], strict=True)]


def read_series(db: SessionDep, runs: Sequence[Run], chosen: list[str]
                ) -> dict[int, dict[str, Series]]:
    """Per run, the chosen metrics as the run page's charts read them: bounded by the point
    budget, not by the run's length."""
    if not chosen:  # chart_data reads every metric when given none
        return {r.id: {} for r in runs}
    limit = get_settings().chart_max_points
    return {r.id: chart_data(db, r, limit, chosen).series for r in runs}


def live_query(runs: Sequence[Run], asked: Sequence[str]) -> str:
    """The fragment's URL: the same selection as the page. The chart settings are not in it:
    static/compare.js adds the current ones to each poll."""
    query = {"ids": ",".join(str(r.id) for r in runs)}
    if asked:
        query["metrics"] = ",".join(asked)
    return f"/runs/compare/_live?{urlencode(query)}"


def compare_context(db: SessionDep, runs: list[Run], asked: Sequence[str],
                    view: ViewSettings) -> dict[str, Any]:
    """What both the page and the live fragment render; ``view`` is the reader's chart
    settings, so a refreshed control shows what its chart shows."""
    available, chosen = choose_metrics(runs, asked)
    series = read_series(db, runs, chosen)
    logged = compared_logged_names(runs)
    findings = {r.id: [f for f in sort_findings(findings_for(db, r.id)) if f.active]
                for r in runs}
    return {"runs": runs, "available": available, "chosen": chosen, "logged": logged,
            "charts": [{"metric": m, "figure": overlay(m, runs, series, logged)}
                       for m in chosen],
            "findings": findings, "differences": spec_differences([r.spec for r in runs]),
            "colors": COLORS, "ids": ",".join(str(r.id) for r in runs),
            "live": any(is_live(r) for r in runs), "live_url": live_query(runs, asked),
            "refresh": REFRESH_SECONDS, "run_axes": run_axes(runs), "view": view}


def compared_logged_names(runs: Sequence[Run]) -> dict[str, str]:
    """Canonical name -> every key the compared runs logged it as (``lr, LR``)."""
    pairs = {(key, name) for run in runs
             for key, name in Reading.from_json(run.metric_reading).renames.items()}
    keys: dict[str, list[str]] = {}
    for key, name in sorted(pairs):
        if key != name:
            keys.setdefault(name, []).append(key)
    return {name: ", ".join(found) for name, found in keys.items()}


def run_axes(runs: Sequence[Run]) -> dict[str, dict[str, float | None]]:
    """Per run what static/compare.js needs to put a step on another x axis: its planned steps
    (% of run) and its mean seconds per step (time since start), None when unknown (an
    imported log, a run that has not started)."""
    return {str(r.id): {"max_steps": max(r.max_steps or 0, r.current_step or 0, 1),
                        "seconds_per_step": seconds_per_step(r)} for r in runs}


def seconds_per_step(run: Run) -> float | None:
    """Elapsed time over the steps done (the pace so far); the worker's smoothed step time
    when there are no start and step counts."""
    elapsed = progress(run).elapsed_s
    if elapsed and run.current_step:
        return elapsed / run.current_step
    return run.seconds_per_step or None


def asked_metrics(request: Request) -> list[str]:
    return [m for v in request.query_params.getlist("metrics") for m in v.split(",") if m]


@router.get("/runs/compare", response_class=HTMLResponse)
def compare_page(request: Request, db: SessionDep) -> Response:
    ids_raw = request.query_params.getlist("ids")
    metrics = asked_metrics(request)
    ids = parse_ids(ids_raw)
    view = parse_view(request.query_params)
    if len(ids_raw) > 1 or len(request.query_params.getlist("metrics")) > 1:
        canonical = {"ids": ",".join(map(str, ids))}  # the list's checkboxes: a shareable URL
        if metrics:
            canonical["metrics"] = ",".join(metrics)
        canonical.update(view.query())
        return RedirectResponse(f"/runs/compare?{urlencode(canonical)}", status_code=303)
    context = compare_context(db, load_runs(db, ids), metrics, view)
    return templates.TemplateResponse(request, "runs/compare.html", context)


@router.get("/runs/compare/_live", response_class=HTMLResponse)
def compare_live(request: Request, db: SessionDep) -> Response:
    """The run cards and the charts, polled every few seconds while any compared run is live
    (the charts replace the page's out of band; static/app.js redraws them in place)."""
    ids = parse_ids(request.query_params.getlist("ids"))
    view = parse_view(request.query_params)  # static/compare.js sends the reader's settings
    try:
        runs = load_runs(db, ids)
    except HTTPException as gone:  # a compared run was deleted meanwhile: say so, stop polling
        return HTMLResponse(GONE.format(why=escape(str(gone.detail))), status_code=STOP_POLLING)
    context = compare_context(db, runs, asked_metrics(request), view)
    return templates.TemplateResponse(request, "runs/_compare_live.html", context)
