"""Server-rendered pages for runs; live panels are htmx fragments (`templates/runs/_*.html`)."""

from __future__ import annotations

import hashlib
import html
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.alerts import egress
from app.alerts.rules import rules_of, split_urls
from app.auth.identity import CurrentIdentity
from app.charts.figures import marks_by_panel, run_figures
from app.charts.panels import monitor_only
from app.charts.summary import chart_summaries
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates, with_toast
from app.datasets.columns import missing_column_problem
from app.datasets.store import list_names
from app.dryruns.api import dry_run_or_404
from app.health.api import coverage, group_by_category, sort_findings
from app.health.models import FindingRecord
from app.health.service import findings_for
from app.metrics.rollups import chart_data
from app.runs import lifecycle, list_views, service
from app.runs.api import deletion_refusal, run_or_404
from app.runs.capabilities import device_problems, vllm_problem, worker_reports
from app.runs.devices import devices_panel
from app.runs.form import LABELS, error_summary, reward_row_count, spec_to_form, validate_form
from app.runs.header import header_facts, shows_artifacts, shows_logs, shows_rollouts
from app.runs.launch import launch
from app.runs.models import Run
from app.runs.presets import preset_or_404
from app.runs.progress import progress
from app.runs.rewards_api import custom_listing
from app.runs.smoke import smoke_context
from app.runs.spec_diff import spec_changes
from app.runs.stages import stage_of
from grpodeck.contract.alerts import unmask
from grpodeck.contract.catalog import BUILTIN_DATASETS, BUILTIN_MODELS, REWARDS
from grpodeck.contract.presets import PRESETS
from grpodeck.contract.spec import (
    DISTRIBUTED,
    LOSS_TYPES,
    MIXED_PRECISIONS,
    SCHEDULERS,
    VLLM_MODES,
    RunSpec,
)

router = APIRouter(include_in_schema=False)
ADVANCED = ("epsilon_high", "loss_type", "num_iterations", "top_p", "top_k",
            "mask_truncated_completions", "gradient_accumulation_steps", "max_grad_norm",
            "warmup_ratio", "lr_scheduler_type", "save_steps", "use_vllm", "use_peft", "lora_r",
            "lora_alpha", "lora_dropout", "lora_target_modules", "vllm_mode",
            "vllm_gpu_memory_utilization", "num_processes", "distributed", "mixed_precision")
SMOKE_STEPS = 5  # the smoke test's default (app.runs.smoke.DEFAULT_STEPS)


def _form_context(values: dict[str, Any], errors: dict[str, str],
                  parent: Run | None = None) -> dict[str, Any]:
    uploaded = {name: "uploaded" for name in list_names(get_settings().datasets_dir)}
    return {"values": values, "errors": errors, "models": BUILTIN_MODELS,
            "datasets": {**BUILTIN_DATASETS, **uploaded}, "rewards": REWARDS,
            "reward_rows": reward_row_count(values), "parent": parent, "labels": LABELS,
            "summary": error_summary(errors), "presets": PRESETS,
            "loss_types": LOSS_TYPES, "schedulers": SCHEDULERS, "advanced_fields": ADVANCED,
            "workers": worker_reports(), "custom_rewards": custom_listing(),
            "distributed_kinds": DISTRIBUTED, "precisions": MIXED_PRECISIONS,
            "vllm_modes": VLLM_MODES}


def _default_values() -> dict[str, Any]:
    return {**spec_to_form(RunSpec().model_dump(mode="json")), "smoke_steps": SMOKE_STEPS}


def _preset_values(name: str) -> dict[str, Any]:
    """The form filled with a preset's spec, every default included (as a clone is)."""
    spec = RunSpec.model_validate(preset_or_404(name).spec)
    return {**spec_to_form(spec.model_dump(mode="json")), "smoke_steps": SMOKE_STEPS,
            "preset": name}


def _parent(db: SessionDep, raw: str | None) -> Run | None:
    """The run a clone comes from (``?from=`` or the form's ``parent_id``); 404 if it is gone,
    refused if it was imported (an imported log has no launchable spec)."""
    if raw in (None, ""):
        return None
    try:
        run_id = int(raw)
    except ValueError:
        raise HTTPException(400, f"from must be a run id, not {raw[:40]!r}") from None
    run = run_or_404(db, run_id)
    if run.source != "launched":
        how = "imported" if run.source == "imported" else "reported by an outside script"
        raise HTTPException(409, f"run {run_id} was {how}: it has no spec to launch again")
    return run


def with_parent_secrets(form: dict[str, str], parent: Run | None) -> dict[str, str]:
    """The clone's form shows its parent's alert URLs masked: a masked URL left as it was
    stands for the parent's full one (the form sent back on an error keeps the masked text)."""
    if parent is None:
        return form
    urls = unmask(split_urls(form.get("alert_urls")), rules_of(parent.spec).urls)
    return {**form, "alert_urls": " ".join(urls)}


@router.get("/", response_class=RedirectResponse)
def home() -> RedirectResponse:
    return RedirectResponse("/runs", status_code=303)


@router.get("/runs/new", response_class=HTMLResponse)
def new_run_form(request: Request, db: SessionDep, dataset: str | None = None,
                 from_: Annotated[str | None, Query(alias="from")] = None,
                 dry_run: int | None = None, preset: str | None = None) -> Response:
    """``?dataset=NAME`` preselects a dataset (the upload page links here); ``?from=ID`` fills
    the form with that run's spec ("New run from this one") and remembers it as the parent;
    ``?preset=NAME`` fills it with a ready-made experiment (the picker above the form)."""
    parent = _parent(db, from_)
    values = spec_to_form(parent.spec) if parent else _default_values()
    if preset:
        values = _preset_values(preset)
    if dry_run is not None:  # "Edit the spec" on a dry run's page
        values = spec_to_form(dry_run_or_404(db, dry_run).spec)
    if dataset:
        values["dataset"] = dataset[:300]
    return templates.TemplateResponse(request, "runs/new.html",
                                      _form_context(values, {}, parent))


@router.post("/runs/new", response_class=HTMLResponse)
async def create_run(request: Request, db: SessionDep, identity: CurrentIdentity) -> Response:
    form = {k: str(v) for k, v in (await request.form()).items()}
    parent = _parent(db, form.get("parent_id"))
    spec, errors = validate_form(with_parent_secrets(form, parent))
    if spec is not None and (refused := await run_in_threadpool(egress.refusals,
                                                                spec.alerts.urls)):
        spec, errors = None, {"alert_urls": "; ".join(refused.values())}
    if spec is not None and (problem := missing_column_problem(spec)) is not None:
        spec, errors = None, {"dataset": problem}
    if spec is not None and (problem := await run_in_threadpool(vllm_problem, spec)):
        spec, errors = None, {"use_vllm": problem}
    if spec is not None and (problems := await run_in_threadpool(device_problems, spec)):
        spec, errors = None, problems
    if spec is None:
        return templates.TemplateResponse(request, "runs/new.html",
                                          _form_context(form, errors, parent), status_code=422)
    run = launch(db, spec, created_by=identity.user_id,
                 parent_id=parent.id if parent else None)
    return RedirectResponse(f"/runs/{run.id}", status_code=303)


def _lineage_context(db: SessionDep, run: Run) -> dict[str, Any]:
    """The run's parent (if it was cloned) and what changed from it."""
    parent = service.get_run(db, run.parent_id) if run.parent_id else None
    changes = spec_changes(parent.spec, run.spec) if parent else []
    return {"parent": parent, "changes": changes}


def _run_context(run: Run, db: SessionDep | None = None) -> dict[str, Any]:
    return {"run": run, "progress": progress(run), "live": lifecycle.is_live(run),
            "refresh": get_settings().live_refresh_seconds,
            "stage": stage_of(db, run) if db is not None else None}


def _findings_context(db: SessionDep, run: Run) -> dict[str, Any]:
    findings = sort_findings(findings_for(db, run.id))
    return {**_run_context(run, db), "findings": findings, "groups": group_by_category(findings),
            "coverage": coverage(db, run)}


def _charts_context(db: SessionDep, run: Run, findings: Sequence[FindingRecord]) -> dict[str, Any]:
    """Charts read the run's summaries (``app/metrics/rollups.py``): rows in proportion to the
    points drawn, whatever the run's length."""
    budget = get_settings().chart_max_points
    data = chart_data(db, run, budget)
    objectives = monitor_only(run.spec)
    marks = marks_by_panel([f.to_dict() for f in findings if f.active], objectives)
    return {**_run_context(run, db), "charts": run_figures(data.series, marks, objectives),
            "after": data.last_step, "version": structure_version(run, findings),
            "max_points": budget}


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
