"""The new-run form (``/runs/new``): empty, from a preset, cloned from a run or from a dry run's
spec; its POST validates the spec against the deployment (alert URLs, dataset columns, vLLM and
devices on the workers) and launches it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.auth.identity import CurrentIdentity
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates
from app.datasets.store import list_names
from app.diagnostics.fixes import Proposal, propose
from app.dryruns.api import dry_run_or_404
from app.launch.answers import Answers, fix_name, parent_finding
from app.launch.capabilities import worker_reports
from app.launch.fix_preview import group_size_preview
from app.launch.form import LABELS, error_summary, reward_row_count, spec_to_form, validate_form
from app.launch.gate import LaunchRefused
from app.launch.launch import launch
from app.launch.ownership import with_parent_secrets, withheld_alerts
from app.launch.presets import preset_or_404
from app.launch.rewards_api import custom_listing
from app.launch.sections import section_states
from app.runs.lookup import run_or_404
from app.runs.models import Run
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
SMOKE_STEPS = 5  # the smoke test's default (app.launch.smoke.DEFAULT_STEPS)


def form_context(values: dict[str, Any], errors: dict[str, str],
                  parent: Run | None = None) -> dict[str, Any]:
    """What the form page shows: the values, their errors and every choice. The dry-run and
    smoke-test buttons answer a refused spec with this same form."""
    uploaded = {name: "uploaded" for name in list_names(get_settings().datasets_dir)}
    return {"values": values, "errors": errors, "models": BUILTIN_MODELS,
            "datasets": {**BUILTIN_DATASETS, **uploaded}, "rewards": REWARDS,
            "reward_rows": reward_row_count(values), "parent": parent, "labels": LABELS,
            "summary": error_summary(errors), "presets": PRESETS,
            "loss_types": LOSS_TYPES, "schedulers": SCHEDULERS,
            "sections": section_states(values, errors),
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


def parent_of_form(db: SessionDep, raw: str | None) -> Run | None:
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


def fix_of(db: SessionDep, parent: Run | None, raw: int | None) -> Proposal | None:
    """``?fix=FINDING`` ("Try this fix" on a finding of the parent run): that finding's settings
    fix, computed here from the stored finding and the parent's spec (never from the URL); a
    404 for a finding of another run, a 409 for one whose category has no settings fix."""
    record = parent_finding(db, parent, raw)
    if record is None or parent is None:
        return None
    proposal = propose(record.category, parent.spec, record.evidence)
    if proposal is None:
        raise HTTPException(409, f"a {record.category.replace('_', ' ')} finding has no change "
                                 "of settings to try (or it is already at its limit)")
    return proposal


def after_launch(run: Run, parent: Run | None, form: dict[str, str]) -> str:
    """Where a launch goes: a fix of the parent opens the pair (before, after) on the compare
    page; any other launch opens the new run's page."""
    if parent is not None and form.get("fix"):
        return f"/runs/compare?ids={parent.id},{run.id}"
    return f"/runs/{run.id}"


@router.get("/runs/new", response_class=HTMLResponse)
def new_run_form(request: Request, db: SessionDep, identity: CurrentIdentity,
                 dataset: str | None = None,
                 from_: Annotated[str | None, Query(alias="from")] = None,
                 dry_run: int | None = None, preset: str | None = None,
                 fix: int | None = None) -> Response:
    """``?dataset=NAME`` preselects a dataset (the upload page links here); ``?from=ID`` fills
    the form with that run's spec ("New run from this one") and remembers it as the parent;
    ``?preset=NAME`` fills it with a ready-made experiment (the picker above the form);
    ``?from=ID&fix=FINDING`` ("Try this fix") fills it with the spec changed by that finding's
    fix, shows the change, and offers a smoke test first."""
    parent = parent_of_form(db, from_)
    proposal = fix_of(db, parent, fix)
    values = spec_to_form(parent.spec) if parent else _default_values()
    if parent and proposal:
        values = {**spec_to_form(proposal.apply(parent.spec)), "smoke_steps": SMOKE_STEPS,
                  "fix": fix, "name": fix_name(parent.name, proposal)}
    if preset:
        values = _preset_values(preset)
    if dry_run is not None:  # "Edit the spec" on a dry run's page
        values = spec_to_form(dry_run_or_404(db, dry_run).spec)
    if dataset:
        values["dataset"] = dataset[:300]
    values = withheld_alerts(values, parent, identity)
    return templates.TemplateResponse(request, "runs/new.html",
                                      {**form_context(values, {}, parent), "fix": proposal,
                                       "preview": fix_preview(db, parent, proposal)})


def fix_preview(db: SessionDep, parent: Run | None, proposal: Proposal | None
                ) -> dict[str, Any] | None:
    """A group-size fix's expected zero-spread shares, from the parent's own rollouts."""
    if parent is None or proposal is None or proposal.changes[0].key != "num_generations":
        return None
    change = proposal.changes[0]
    return group_size_preview(db, parent.id, int(change.old), int(change.new))


@router.post("/runs/new", response_class=HTMLResponse)
async def create_run(request: Request, db: SessionDep, identity: CurrentIdentity) -> Response:
    form = {k: str(v) for k, v in (await request.form()).items()}
    parent = parent_of_form(db, form.get("parent_id"))
    answers = Answers.of(parent_finding(db, parent, form.get("fix")))
    spec, errors = validate_form(with_parent_secrets(form, parent, parent and parent.spec, identity))
    if spec is not None:
        try:  # the launch gate resolves hosts and asks the workers: off the event loop
            run = await run_in_threadpool(launch, db, spec, created_by=identity.user_id,
                                          parent_id=parent.id if parent else None,
                                          answers=answers)
            return RedirectResponse(after_launch(run, parent, form), status_code=303)
        except LaunchRefused as refused:
            errors = refused.form_errors()
    return templates.TemplateResponse(request, "runs/new.html",
                                      form_context(form, errors, parent), status_code=422)
