"""The run page (``/runs/{id}``), server-rendered; its live panels are htmx fragments
(`templates/runs/_*.html`), and its Cancel and Delete buttons post here."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.identity import CurrentIdentity
from app.charts.figures import run_figures
from app.charts.panels import monitor_only
from app.charts.summary import chart_summaries
from app.compare.spec_diff import spec_changes
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates, with_toast
from app.diagnostics.fixes import propose
from app.health.api import coverage, group_by_category, sort_findings
from app.health.links import finding_links
from app.health.models import FindingRecord
from app.health.service import findings_for
from app.launch.answers import answered
from app.launch.smoke import smoke_context
from app.listing import views as list_views
from app.metrics import samples
from app.metrics.reading import run_logged_names
from app.metrics.rollups import chart_data
from app.run_page import removal
from app.run_page.devices import devices_panel
from app.run_page.header import header_facts, shows_artifacts, shows_logs, shows_rollouts
from app.run_page.live_charts import chart_marks, marks_payload, versions
from app.run_page.stages import stage_of
from app.runs import lifecycle, service
from app.runs.lookup import run_or_404
from app.runs.models import Run
from app.runs.progress import progress

router = APIRouter(include_in_schema=False)
def _lineage_context(db: SessionDep, run: Run) -> dict[str, Any]:
    """The run's parent (if it was cloned), what changed from it, and the finding it answers
    (a "Try this fix" run)."""
    parent = service.get_run(db, run.parent_id) if run.parent_id else None
    changes = spec_changes(parent.spec, run.spec) if parent else []
    return {"parent": parent, "changes": changes, "answers": answered(db, run)}


def _run_context(run: Run, db: SessionDep | None = None) -> dict[str, Any]:
    return {"run": run, "progress": progress(run), "live": lifecycle.is_live(run),
            "refresh": get_settings().live_refresh_seconds,
            "stage": stage_of(db, run) if db is not None else None}


def finding_extras(run: Run, groups: Sequence[Sequence[FindingRecord]]
                   ) -> dict[int, dict[str, Any]]:
    """Per finding shown (each category's first record): where it leads (its rollouts, its
    zoomed charts) and, while it is active, its settings fix ("Try this fix")."""
    extras: dict[int, dict[str, Any]] = {}
    for group in groups:
        f = group[0]
        fix = propose(f.category, run.spec or {}, f.evidence) if f.active else None
        extras[f.id] = {"links": finding_links(run.id, f.id, f.first_step, f.last_step),
                        "fix": fix}
    return extras


def _findings_context(db: SessionDep, run: Run) -> dict[str, Any]:
    findings = sort_findings(findings_for(db, run.id))
    groups = group_by_category(findings)
    return {**_run_context(run, db), "findings": findings, "groups": groups,
            "extras": finding_extras(run, groups), "coverage": coverage(db, run)}


def _charts_context(db: SessionDep, run: Run, findings: Sequence[FindingRecord]) -> dict[str, Any]:
    """Charts read the run's summaries (``app/metrics/rollups.py``): rows in proportion to the
    points drawn, whatever the run's length."""
    budget = get_settings().chart_max_points
    data = chart_data(db, run, budget)
    marks = chart_marks(run, findings)
    kept = samples.load(db, run.id)  # the system charts' samples, each at its time
    return {**_run_context(run, db),
            "charts": run_figures(data.series, marks, monitor_only(run.spec), kept, budget,
                                  run_logged_names(run.metric_reading)),
            "after": data.last_step, "after_ms": kept.times[-1] if kept.times else 0,
            "versions": versions(run, marks), "max_points": budget}


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    context = _findings_context(db, run)
    context.update(_charts_context(db, run, context["findings"]))
    context["summaries"] = chart_summaries(db, run)
    context.update(_lineage_context(db, run))
    context.update(smoke_context(db, run))
    context.update(facts=header_facts(run), show_rollouts=shows_rollouts(db, run),
                   show_logs=shows_logs(db, run), show_artifacts=shows_artifacts(db, run),
                   devices=devices_panel(db, run))
    return templates.TemplateResponse(request, "runs/detail.html", context)


@router.get("/runs/{run_id}/_devices", response_class=HTMLResponse)
def devices_fragment(run_id: int, request: Request, db: SessionDep) -> Response:
    """The Devices panel, polled while the run is live (each rank's latest step)."""
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_devices.html", {
        **_run_context(run), "devices": devices_panel(db, run)})


@router.get("/runs/{run_id}/_summaries", response_class=HTMLResponse)
def summaries_panel(run_id: int, request: Request, db: SessionDep) -> Response:
    """The charts in words, polled while the run is live (aggregates only: cheap)."""
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_chart_summaries.html", {
        **_run_context(run), "summaries": chart_summaries(db, run)})


@router.get("/runs/{run_id}/_findings", response_class=HTMLResponse)
def findings_panel(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_findings.html", _findings_context(db, run))


@router.get("/runs/{run_id}/_status", response_class=HTMLResponse)
def status_panel(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_status.html", _run_context(run, db))


@router.get("/runs/{run_id}/_charts", response_class=HTMLResponse)
def charts_panel(run_id: int, request: Request, db: SessionDep, v: str | None = None,
                 m: str | None = None) -> Response:
    """Polled while a run is live (``v``, ``m``: the versions the page drew,
    ``app/run_page/live_charts.py``): 204 while both hold, only the findings' marks when only
    they changed, the whole panel when the charts' shape did. New points come from
    ``GET /api/runs/{id}/metrics?after=N`` (static/charts.js)."""
    run = run_or_404(db, run_id)
    findings = findings_for(db, run.id)
    marks = chart_marks(run, findings)
    now = versions(run, marks)
    if v is not None and v == now.shape:
        if m == now.marks:
            return Response(status_code=204)
        return templates.TemplateResponse(request, "runs/_chart_marks.html", {
            **_run_context(run), "versions": now, "marks": marks_payload(run, marks)})
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
    response = templates.TemplateResponse(request, "runs/_status.html",
                                          {**_run_context(run, db), "flash": flash})
    return with_toast(response, flash or f"Cancelling run {run.id}: it stops at its next step.")


@router.post("/runs/{run_id}/delete", response_class=HTMLResponse)
async def delete_run(run_id: int, request: Request, db: SessionDep,
                     identity: CurrentIdentity) -> Response:
    """The Delete buttons (htmx, confirmed first): the run page goes back to the list; the list
    (its form carries ``list``, the filters it shows) re-renders its table."""
    run = run_or_404(db, run_id)
    form = {k: str(v) for k, v in (await request.form()).items()}
    refusal = identity.manage_refusal(run) or removal.deletion_refusal(run)
    status_code = 403 if identity.manage_refusal(run) else 409
    if refusal is not None and "list" in form:
        return list_views.after_change(request, db, form, refusal, status_code)
    if refusal is not None:
        return HTMLResponse(f'<div class="alert critical">{html.escape(refusal)}</div>',
                            status_code=status_code)
    removal.delete_run(db, run)
    db.commit()
    removal.remove_files(run_id)
    if "list" in form:
        return list_views.after_change(request, db, form, f"run {run_id} deleted")
    if request.headers.get("hx-request") == "true":
        return Response(status_code=200, headers={"HX-Redirect": "/runs"})
    return RedirectResponse("/runs", status_code=303)
