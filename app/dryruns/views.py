"""Pages for trying a spec before launching it: the new-run form's "Dry run" and "Smoke test"
buttons, and the dry run's page (polled until the worker answers)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.core.templating import templates
from app.dryruns import service
from app.dryruns.api import DEFAULT_PROMPTS, dry_run_or_404
from app.dryruns.models import DryRun
from app.runs import smoke
from app.runs.form import validate_form
from app.runs.launch import launch
from app.runs.views import _form_context
from grpodeck.contract.spec import RunSpec

router = APIRouter(include_in_schema=False)


async def _spec_from_form(request: Request) -> tuple[RunSpec | None, dict[str, str],
                                                      Response | None]:
    form = {k: str(v) for k, v in (await request.form()).items()}
    spec, errors = validate_form(form)
    try:
        smoke.smoke_steps(form.get("smoke_steps"))
    except ValueError as exc:
        spec, errors = None, {**errors, "smoke_steps": str(exc)}
    if spec is None:
        return None, form, templates.TemplateResponse(
            request, "runs/new.html", _form_context(form, errors), status_code=422)
    return spec, form, None


@router.post("/dry-runs", response_class=HTMLResponse)
async def create_dry_run(request: Request, db: SessionDep, identity: CurrentIdentity) -> Response:
    spec, _, refused = await _spec_from_form(request)
    if refused is not None:
        return refused
    dry = service.start(db, spec, DEFAULT_PROMPTS, identity.user_id)  # type: ignore[arg-type]
    return RedirectResponse(f"/dry-runs/{dry.id}", status_code=303)


@router.post("/runs/smoke", response_class=HTMLResponse)
async def create_smoke_test(request: Request, db: SessionDep,
                            identity: CurrentIdentity) -> Response:
    spec, form, refused = await _spec_from_form(request)
    if refused is not None:
        return refused
    run = smoke.launch_smoke(db, spec, smoke.smoke_steps(form.get("smoke_steps")),  # type: ignore[arg-type]
                             identity.user_id)
    return RedirectResponse(f"/runs/{run.id}", status_code=303)


def _context(dry: DryRun) -> dict[str, Any]:
    return {"dry": dry, "result": dry.result or {}, "smoke_default": smoke.DEFAULT_STEPS}


@router.get("/dry-runs/{dry_run_id}", response_class=HTMLResponse)
def dry_run_page(dry_run_id: int, request: Request, db: SessionDep) -> Response:
    return templates.TemplateResponse(request, "dryruns/detail.html",
                                      _context(dry_run_or_404(db, dry_run_id)))


@router.get("/dry-runs/{dry_run_id}/_result", response_class=HTMLResponse)
def dry_run_result(dry_run_id: int, request: Request, db: SessionDep) -> Response:
    return templates.TemplateResponse(request, "dryruns/_result.html",
                                      _context(dry_run_or_404(db, dry_run_id)))


@router.post("/dry-runs/{dry_run_id}/launch", response_class=HTMLResponse)
async def launch_from_dry_run(dry_run_id: int, request: Request, db: SessionDep,
                              identity: CurrentIdentity) -> Response:
    """Launch the dry run's spec: ``mode=smoke`` for a smoke test of ``smoke_steps``, else the
    full run."""
    dry = dry_run_or_404(db, dry_run_id)
    form = {k: str(v) for k, v in (await request.form()).items()}
    spec = RunSpec.model_validate(dry.spec)
    if form.get("mode") == "smoke":
        try:
            steps = smoke.smoke_steps(form.get("smoke_steps"))
        except ValueError as exc:
            return HTMLResponse(f'<div class="alert critical">{exc}</div>', status_code=422)
        run = smoke.launch_smoke(db, spec, steps, identity.user_id)
    else:
        run = launch(db, spec, created_by=identity.user_id)
    return RedirectResponse(f"/runs/{run.id}", status_code=303)
