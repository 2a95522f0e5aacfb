"""Server-rendered pages for runs; live panels are htmx fragments (`templates/runs/_*.html`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.charts.figures import marks_by_panel, run_figures
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates
from app.health.api import sort_findings
from app.health.service import findings_for
from app.metrics.series import downsample, load_series
from app.runs import lifecycle, service
from app.runs.api import run_or_404
from app.runs.form import REWARD_ROWS, validate_form
from app.runs.launch import launch
from app.runs.models import Run
from app.runs.progress import progress
from app.runs.spec import RunSpec
from worker.catalog import BUILTIN_DATASETS, BUILTIN_MODELS
from worker.rewards.registry import REWARDS

router = APIRouter(include_in_schema=False)


def _form_context(values: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    return {"values": values, "errors": errors, "models": BUILTIN_MODELS,
            "datasets": BUILTIN_DATASETS, "rewards": REWARDS, "reward_rows": REWARD_ROWS}


def _default_values() -> dict[str, Any]:
    spec = RunSpec()
    values: dict[str, Any] = spec.model_dump(exclude={"rewards"})
    for i, reward in enumerate(spec.rewards):
        values[f"reward_{i}_name"] = reward.name
        values[f"reward_{i}_weight"] = reward.weight
        values[f"reward_{i}_params"] = ", ".join(f"{k}={v}" for k, v in reward.params.items())
    return {k: ("" if v is None else v) for k, v in values.items()}


@router.get("/", response_class=RedirectResponse)
def home() -> RedirectResponse:
    return RedirectResponse("/runs", status_code=303)


@router.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, db: SessionDep) -> Response:
    return templates.TemplateResponse(request, "runs/list.html", _list_context(db))


@router.get("/runs/_table", response_class=HTMLResponse)
def runs_table(request: Request, db: SessionDep) -> Response:
    return templates.TemplateResponse(request, "runs/_table.html", _list_context(db))


def _list_context(db: SessionDep) -> dict[str, Any]:
    runs = service.list_runs(db)
    return {"runs": runs, "progress": {r.id: progress(r) for r in runs},
            "any_live": any(lifecycle.is_live(r) for r in runs)}


@router.get("/runs/new", response_class=HTMLResponse)
def new_run_form(request: Request) -> Response:
    return templates.TemplateResponse(request, "runs/new.html",
                                      _form_context(_default_values(), {}))


@router.post("/runs/new", response_class=HTMLResponse)
async def create_run(request: Request, db: SessionDep) -> Response:
    form = {k: str(v) for k, v in (await request.form()).items()}
    spec, errors = validate_form(form)
    if spec is None:
        return templates.TemplateResponse(request, "runs/new.html", _form_context(form, errors),
                                          status_code=422)
    run = launch(db, spec)
    return RedirectResponse(f"/runs/{run.id}", status_code=303)


def _run_context(db: SessionDep, run: Run) -> dict[str, Any]:
    return {"run": run, "progress": progress(run), "live": lifecycle.is_live(run),
            "refresh": get_settings().live_refresh_seconds}


def _charts_context(db: SessionDep, run: Run) -> dict[str, Any]:
    limit = get_settings().chart_max_points
    series = {n: downsample(s, limit) for n, s in load_series(db, run.id).items()}
    findings = sort_findings(findings_for(db, run.id))
    marks = marks_by_panel([f.to_dict() for f in findings if f.active])
    return {**_run_context(db, run), "charts": run_figures(series, marks), "findings": findings,
            "version": data_version(run)}


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/detail.html", _charts_context(db, run))


@router.get("/runs/{run_id}/_status", response_class=HTMLResponse)
def status_panel(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_status.html", _run_context(db, run))


def data_version(run: Run) -> str:
    """Changes whenever the charts or findings could have: new metrics, or a new status."""
    reported = run.last_report_at.timestamp() if run.last_report_at else 0
    return f"{reported:.3f}-{run.status}"


@router.get("/runs/{run_id}/_charts", response_class=HTMLResponse)
def charts_panel(run_id: int, request: Request, db: SessionDep, v: str | None = None) -> Response:
    """Polled while a run is live; answers 204 (htmx keeps the panel) when nothing changed,
    so a slow step (tens of seconds on a real model) costs no chart rebuilds."""
    run = run_or_404(db, run_id)
    if v is not None and v == data_version(run):
        return Response(status_code=204)
    return templates.TemplateResponse(request, "runs/_charts.html", _charts_context(db, run))


@router.post("/runs/{run_id}/cancel", response_class=HTMLResponse)
def cancel_run(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    flash = None
    try:
        lifecycle.request_cancel(run)
        db.commit()
    except lifecycle.TransitionError as exc:
        flash = str(exc)
    return templates.TemplateResponse(request, "runs/_status.html",
                                      {**_run_context(db, run), "flash": flash})
