"""The compare page (`/runs/compare?ids=1,2,3`): chosen metrics of several runs overlaid on
shared charts aligned by step, each run's verdict and findings side by side, and the spec
fields that differ. The URL holds the selection, so a comparison can be shared.

Series are downsampled exactly as the run page does (``chart_max_points`` per trace).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select

from app.charts.figures import PLAIN_LAYOUT
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates
from app.health.api import sort_findings
from app.health.service import findings_for
from app.metrics.series import Series, downsample, load_series
from app.runs.models import Run
from app.runs.service import storable_id
from app.runs.spec_diff import spec_differences

router = APIRouter(include_in_schema=False)

MIN_RUNS, MAX_RUNS = 2, 8
MAX_METRICS = 12
DEFAULT_METRICS = ("reward", "reward_std", "frac_reward_zero_std", "kl", "entropy",
                   "completions/mean_length")
# One colour per run, the same on every chart (plotly's default cycle, colour-blind friendly
# enough for 8 lines; the legend names each run).
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f")


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


def overlay(metric: str, runs: Sequence[Run], series: dict[int, dict[str, Series]]
            ) -> dict[str, Any]:
    """One chart: this metric of every run that logged it, one colour per run."""
    data = []
    for i, run in enumerate(runs):
        s = series[run.id].get(metric)
        if s is None:
            continue
        data.append({"type": "scatter", "mode": "lines", "name": f"#{run.id} {run.name}",
                     "x": s.steps, "y": [v if math.isfinite(v) else None for v in s.values],
                     "line": {"color": COLORS[i % len(COLORS)], "width": 1.6},
                     "meta": run.id})
    layout = {**PLAIN_LAYOUT, "title": {"text": metric, "font": {"size": 14}, "x": 0.02,
                                        "xanchor": "left"},
              "hovermode": "x unified", "legend": {"orientation": "h", "y": -0.3,
                                                   "font": {"size": 10}}}
    return {"data": data, "layout": layout}


def compare_context(db: SessionDep, runs: list[Run], asked: Sequence[str]) -> dict[str, Any]:
    available, chosen = choose_metrics(runs, asked)
    limit = get_settings().chart_max_points
    series = {r.id: {n: downsample(s, limit) for n, s in load_series(db, r.id, chosen).items()}
              for r in runs}
    findings = {r.id: [f for f in sort_findings(findings_for(db, r.id)) if f.active]
                for r in runs}
    return {"runs": runs, "available": available, "chosen": chosen,
            "charts": [{"metric": m, "figure": overlay(m, runs, series)} for m in chosen],
            "findings": findings, "differences": spec_differences([r.spec for r in runs]),
            "colors": COLORS, "ids": ",".join(str(r.id) for r in runs)}


@router.get("/runs/compare", response_class=HTMLResponse)
def compare_page(request: Request, db: SessionDep) -> Response:
    ids_raw = request.query_params.getlist("ids")
    metrics = [m for v in request.query_params.getlist("metrics") for m in v.split(",") if m]
    ids = parse_ids(ids_raw)
    if len(ids_raw) > 1 or len(request.query_params.getlist("metrics")) > 1:
        canonical = {"ids": ",".join(map(str, ids))}  # the list's checkboxes: a shareable URL
        if metrics:
            canonical["metrics"] = ",".join(metrics)
        return RedirectResponse(f"/runs/compare?{urlencode(canonical)}", status_code=303)
    context = compare_context(db, load_runs(db, ids), metrics)
    return templates.TemplateResponse(request, "runs/compare.html", context)
