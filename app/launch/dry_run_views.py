"""Pages for trying a spec before launching it: the new-run form's "Dry run" and "Smoke test"
buttons, and the dry run's page (polled until the worker answers)."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.identity import CurrentIdentity, Identity
from app.core.db import SessionDep
from app.core.templating import templates
from app.dryruns.api import DEFAULT_PROMPTS, dry_run_or_404
from app.dryruns.models import DryRun
from app.launch import smoke
from app.launch.answers import Answers, parent_finding
from app.launch.form import validate_form
from app.launch.gate import LaunchRefused
from app.launch.launch import launch, start_dry_run
from app.launch.ownership import own_spec, with_parent_secrets
from app.launch.views import after_launch, form_context, parent_of_form
from app.runs.models import Run
from grpodeck.contract.spec import RunSpec

router = APIRouter(include_in_schema=False)


async def _spec_from_form(request: Request, identity: Identity, parent: Run | None = None
                          ) -> tuple[RunSpec | None, dict[str, str], dict[str, str]]:
    """(the form's spec or None, the form, its errors); a clone's masked alert URLs stand
    for its parent's only for the parent's owner."""
    form = {k: str(v) for k, v in (await request.form()).items()}
    spec, errors = validate_form(with_parent_secrets(form, parent, parent and parent.spec, identity))
    try:
        smoke.smoke_steps(form.get("smoke_steps"))
    except ValueError as exc:
        spec, errors = None, {**errors, "smoke_steps": str(exc)}
    return spec, form, errors


def _refused_form(request: Request, form: dict[str, str], errors: dict[str, str],
                  parent: Run | None = None) -> Response:
    """The form again, with every error (as "Launch" answers)."""
    return templates.TemplateResponse(request, "runs/new.html",
                                      form_context(form, errors, parent), status_code=422)


@router.post("/dry-runs", response_class=HTMLResponse)
async def create_dry_run(request: Request, db: SessionDep, identity: CurrentIdentity) -> Response:
    """A dry run of the form's spec (a clone's masked alert URLs standing for its parent's, as
    "Launch" reads them)."""
    parent = parent_of_form(db, (await request.form()).get("parent_id"))
    spec, form, errors = await _spec_from_form(request, identity, parent)
    if spec is None:
        return _refused_form(request, form, errors, parent)
    try:  # the launch gate resolves hosts and asks the workers: off the event loop
        dry = await run_in_threadpool(start_dry_run, db, spec, DEFAULT_PROMPTS, identity.user_id)
    except LaunchRefused as refused:
        return _refused_form(request, form, refused.form_errors(), parent)
    return RedirectResponse(f"/dry-runs/{dry.id}", status_code=303)


@router.post("/runs/smoke", response_class=HTMLResponse)
async def create_smoke_test(request: Request, db: SessionDep,
                            identity: CurrentIdentity) -> Response:
    """A smoke test of the form's spec; a clone's smoke test remembers the run it was cloned
    from (its page diffs the two; a fix's opens the pair on the compare page) and a fix's the
    finding it answers."""
    parent = parent_of_form(db, (await request.form()).get("parent_id"))
    spec, form, errors = await _spec_from_form(request, identity, parent)
    answers = Answers.of(parent_finding(db, parent, form.get("fix")))
    if spec is None:
        return _refused_form(request, form, errors, parent)
    try:
        run = await run_in_threadpool(smoke.launch_smoke, db, spec,
                                      smoke.smoke_steps(form.get("smoke_steps")),
                                      identity.user_id, parent.id if parent else None, answers)
    except LaunchRefused as refused:
        return _refused_form(request, form, refused.form_errors(), parent)
    return RedirectResponse(after_launch(run, parent, form), status_code=303)


def _waited_s(dry: DryRun) -> float:
    """How long the dry run has waited, rendered by the server: each 1 s refresh brings the
    real figure, never a "0s" the browser's ticker then has to correct (issue 34)."""
    created = dry.created_at if dry.created_at.tzinfo else dry.created_at.replace(tzinfo=UTC)
    return max(0.0, (datetime.now(UTC) - created).total_seconds())


def _context(dry: DryRun) -> dict[str, Any]:
    return {"dry": dry, "result": dry.result or {}, "smoke_default": smoke.DEFAULT_STEPS,
            "waited_s": _waited_s(dry)}


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
    full run. Another user's dry run launches without its owner's alert destinations."""
    dry = dry_run_or_404(db, dry_run_id)
    form = {k: str(v) for k, v in (await request.form()).items()}
    spec = RunSpec.model_validate(own_spec(dry.spec, dry, identity))
    try:
        if form.get("mode") == "smoke":
            steps = smoke.smoke_steps(form.get("smoke_steps"))
            run = await run_in_threadpool(smoke.launch_smoke, db, spec, steps, identity.user_id)
        else:
            run = await run_in_threadpool(launch, db, spec, created_by=identity.user_id)
    except (ValueError, LaunchRefused) as exc:
        return HTMLResponse(f'<div class="alert critical">{escape(str(exc))}</div>',
                            status_code=422)
    return RedirectResponse(f"/runs/{run.id}", status_code=303)
