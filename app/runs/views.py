"""Server-rendered pages for runs; live panels are htmx fragments (`templates/runs/_*.html`)."""

from __future__ import annotations

import hashlib
import html
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.identity import CurrentIdentity
from app.charts.figures import marks_by_panel, run_figures
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates
from app.datasets.store import list_names
from app.health.api import group_by_category, sort_findings
from app.health.models import FindingRecord
from app.health.service import findings_for
from app.metrics.series import downsample, load_series
from app.runs import lifecycle, list_views, service
from app.runs.api import deletion_refusal, run_or_404
from app.runs.form import REWARD_ROWS, validate_form
from app.runs.launch import launch
from app.runs.models import Run
from app.runs.progress import progress
from app.runs.spec import RunSpec
from worker.catalog import BUILTIN_DATASETS, BUILTIN_MODELS
from worker.rewards.registry import REWARDS

router = APIRouter(include_in_schema=False)


def _form_context(values: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    uploaded = {name: "uploaded" for name in list_names(get_settings().datasets_dir)}
    return {"values": values, "errors": errors, "models": BUILTIN_MODELS,
            "datasets": {**BUILTIN_DATASETS, **uploaded}, "rewards": REWARDS,
            "reward_rows": REWARD_ROWS}


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


@router.get("/runs/new", response_class=HTMLResponse)
def new_run_form(request: Request, dataset: str | None = None) -> Response:
    """``?dataset=NAME`` preselects a dataset (the upload page links here)."""
    values = _default_values()
    if dataset:
        values["dataset"] = dataset[:300]
    return templates.TemplateResponse(request, "runs/new.html", _form_context(values, {}))


@router.post("/runs/new", response_class=HTMLResponse)
async def create_run(request: Request, db: SessionDep, identity: CurrentIdentity) -> Response:
    form = {k: str(v) for k, v in (await request.form()).items()}
    spec, errors = validate_form(form)
    if spec is None:
        return templates.TemplateResponse(request, "runs/new.html", _form_context(form, errors),
                                          status_code=422)
    run = launch(db, spec, created_by=identity.user_id)
    return RedirectResponse(f"/runs/{run.id}", status_code=303)


def _run_context(run: Run) -> dict[str, Any]:
    return {"run": run, "progress": progress(run), "live": lifecycle.is_live(run),
            "refresh": get_settings().live_refresh_seconds}


def _findings_context(db: SessionDep, run: Run) -> dict[str, Any]:
    findings = sort_findings(findings_for(db, run.id))
    return {**_run_context(run), "findings": findings, "groups": group_by_category(findings)}


def _charts_context(db: SessionDep, run: Run, findings: Sequence[FindingRecord]) -> dict[str, Any]:
    limit = get_settings().chart_max_points
    series = {n: downsample(s, limit) for n, s in load_series(db, run.id).items()}
    marks = marks_by_panel([f.to_dict() for f in findings if f.active])
    after = max((s.steps[-1] for s in series.values() if s.steps), default=0)
    return {**_run_context(run), "charts": run_figures(series, marks), "after": after,
            "version": structure_version(run, findings)}


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    context = _findings_context(db, run)
    context.update(_charts_context(db, run, context["findings"]))
    return templates.TemplateResponse(request, "runs/detail.html", context)


@router.get("/runs/{run_id}/_findings", response_class=HTMLResponse)
def findings_panel(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_findings.html", _findings_context(db, run))


@router.get("/runs/{run_id}/_status", response_class=HTMLResponse)
def status_panel(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_status.html", _run_context(run))


def structure_version(run: Run, findings: Sequence[FindingRecord]) -> str:
    """Changes when the charts must be rebuilt: a new status, a new metric, a finding opened,
    changed severity or resolved. New points alone don't: the page appends them."""
    marks = sorted((f.category, f.metric_key, f.severity, f.first_step) for f in findings if f.active)
    digest = hashlib.sha1(repr((run.status, run.metric_names, marks)).encode()).hexdigest()
    return digest[:16]


@router.get("/runs/{run_id}/_charts", response_class=HTMLResponse)
def charts_panel(run_id: int, request: Request, db: SessionDep, v: str | None = None) -> Response:
    """Polled while a run is live; answers 204 (htmx keeps the panel) unless the charts' shape
    changed, so a long run is not re-read every few seconds; new points come from
    ``GET /api/runs/{id}/metrics?after=N`` (static/app.js)."""
    run = run_or_404(db, run_id)
    findings = findings_for(db, run.id)
    if v is not None and v == structure_version(run, findings):
        return Response(status_code=204)
    return templates.TemplateResponse(request, "runs/_charts.html",
                                      _charts_context(db, run, findings))


@router.post("/runs/{run_id}/cancel", response_class=HTMLResponse)
def cancel_run(run_id: int, request: Request, db: SessionDep,
               identity: CurrentIdentity) -> Response:
    run = run_or_404(db, run_id)
    if (reason := identity.manage_refusal(run)) is not None:
        return HTMLResponse(f'<div class="alert critical">{html.escape(reason)}</div>',
                            status_code=403)
    flash = None
    try:
        lifecycle.request_cancel(run)
        db.commit()
    except lifecycle.TransitionError as exc:
        flash = str(exc)
    return templates.TemplateResponse(request, "runs/_status.html",
                                      {**_run_context(run), "flash": flash})


@router.post("/runs/{run_id}/delete", response_class=HTMLResponse)
async def delete_run(run_id: int, request: Request, db: SessionDep,
                     identity: CurrentIdentity) -> Response:
    """The Delete buttons (htmx, confirmed first): the run page goes back to the list; the list
    (its form carries ``list``, the filters it shows) re-renders its table."""
    run = run_or_404(db, run_id)
    form = {k: str(v) for k, v in (await request.form()).items()}
    refusal = identity.manage_refusal(run) or deletion_refusal(run)
    status_code = 403 if identity.manage_refusal(run) else 409
    if refusal is not None and "list" in form:
        return list_views.after_change(request, db, form, refusal, status_code)
    if refusal is not None:
        return HTMLResponse(f'<div class="alert critical">{html.escape(refusal)}</div>',
                            status_code=status_code)
    service.delete_run(db, run)
    db.commit()
    service.remove_files(run_id)
    if "list" in form:
        return list_views.after_change(request, db, form, f"run {run_id} deleted")
    if request.headers.get("hx-request") == "true":
        return Response(status_code=200, headers={"HX-Redirect": "/runs"})
    return RedirectResponse("/runs", status_code=303)
