"""The rollout inspector: /runs/{id}/rollouts (filters swap the groups with htmx)."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.charts.rollout_figures import advantages_figure, outcomes_figure
from app.core.db import SessionDep
from app.core.templating import templates
from app.rollouts import queries
from app.rollouts.api import pick_step
from app.rollouts.queries import RolloutFilter
from app.rollouts.service import captured_steps, nearest_step
from app.runs.lookup import run_or_404
from app.runs.models import Run

router = APIRouter(include_in_schema=False)


def _step(value: str | None = Query(None, alias="step")) -> int | None:
    """The form's step select sends '' for 'all steps'."""
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise HTTPException(422, f"step must be a number, not {value!r}") from None


StepParam = Annotated[int | None, Depends(_step)]


def _within(value: str | None = Query(None, alias="within")) -> tuple[int, int] | None:
    """A finding's link names its step range (``within=A-B``, app/health/links.py); anything
    else is no range (it only steers which captured step is shown)."""
    m = re.fullmatch(r"(\d{1,9})-(\d{1,9})", value or "")
    return (int(m[1]), int(m[2])) if m else None


WithinParam = Annotated[tuple[int, int] | None, Depends(_within)]
FOLD_CHARS = 600


def kept_per_step(run: Run) -> dict[str, int] | None:
    """What the run asked to keep per captured step and what one step's batch can hold (the
    first ``rollout_groups`` groups of the batch are kept): the page says when fewer are kept
    than asked, instead of letting "4 groups" read as a promise. None for imported runs."""
    spec = run.spec or {}
    groups, asked = spec.get("num_generations"), spec.get("rollout_groups")
    if not groups or asked is None:
        return None
    batch = spec.get("per_device_train_batch_size") or groups
    return {"asked": asked, "batch": batch, "holds": batch // groups}


def _landing(steps: list[int], step: int | None, f: RolloutFilter,
             within: tuple[int, int] | None) -> dict[str, Any]:
    """The step shown. A step with no rollouts (a finding's last step, an alert's link) shows
    the nearest captured one, preferably inside ``within``, and ``asked`` keeps the step asked
    for so the page says so: it was a 404 listing only the newest 20 captured steps."""
    if not steps:
        return {"step": None, "asked": None}
    if step is None or step in steps:
        return {"step": pick_step(steps, step, f), "asked": None}
    chosen = nearest_step(steps, step, within)
    return {"step": chosen, "asked": step, "within": within,
            "in_range": within is not None and within[0] <= chosen <= within[1]}


def _neighbours(steps: list[int], chosen: int | None, request: Request) -> dict[str, Any]:
    """The captured steps before and after the one shown, with the page's other parameters
    (``keep``), so every captured step is a click away, not only through the step list."""
    if chosen is None:
        return {}
    i = steps.index(chosen)
    params = [(k, v) for k, v in request.query_params.multi_items()
              if k not in ("step", "within") and v != ""]
    return {"older": steps[i - 1] if i > 0 else None,
            "newer": steps[i + 1] if i + 1 < len(steps) else None,
            "position": i + 1, "keep": f"&{urlencode(params)}" if params else ""}


def _groups_context(db: SessionDep, run: Run, step: int | None, f: RolloutFilter,
                    request: Request, within: tuple[int, int] | None = None) -> dict[str, Any]:
    steps = captured_steps(db, run.id)
    landing = _landing(steps, step, f, within)
    chosen = landing["step"]
    groups = queries.find_groups(db, run.id, chosen, f) if steps else []
    components = sorted({name for g in groups for c in g.completions
                         for name in (c.get("rewards") or {})})
    return {"steps": steps, **landing, "groups": groups, "filter": f,
            "components": components, "fold": FOLD_CHARS,
            "kept": queries.groups_at(db, run.id, chosen) if steps else 0,
            "filtered": queries.is_filtered(f), "capture": kept_per_step(run),
            "seen": queries.steps_seen(db, run.id, [g.prompt_key for g in groups]),
            **_neighbours(steps, chosen, request)}


def inspector_url(run_id: int, request: Request) -> str:
    """The full inspector page for the filters of a fragment request: what the address bar
    shows, so a filtered view can be shared, reloaded and reached again with Back."""
    params = [(k, v) for k, v in request.query_params.multi_items() if v != ""]
    query = urlencode(params)
    return f"/runs/{run_id}/rollouts" + (f"?{query}" if query else "")


@router.get("/runs/{run_id}/rollouts", response_class=HTMLResponse)
def inspector(run_id: int, request: Request, db: SessionDep,
              f: Annotated[RolloutFilter, Query()], step: StepParam = None,
              within: WithinParam = None) -> Response:
    run = run_or_404(db, run_id)
    charts = [c for c in (outcomes_figure(queries.outcome_shares(db, run_id)),
                          advantages_figure(queries.advantages_by_step(db, run_id))) if c]
    return templates.TemplateResponse(request, "rollouts/inspector.html", {
        "run": run, "charts": charts, **_groups_context(db, run, step, f, request, within)})


@router.get("/runs/{run_id}/rollouts/_groups", response_class=HTMLResponse)
def groups_fragment(run_id: int, request: Request, db: SessionDep,
                    f: Annotated[RolloutFilter, Query()], step: StepParam = None) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "rollouts/_groups.html", {
        "run": run, **_groups_context(db, run, step, f, request)},
        headers={"HX-Push-Url": inspector_url(run_id, request)})


@router.get("/runs/{run_id}/rollouts/prompt/{key}", response_class=HTMLResponse)
def prompt_page(run_id: int, key: str, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    groups = queries.prompt_history(db, run_id, key)
    return templates.TemplateResponse(request, "rollouts/prompt.html", {
        "run": run, "groups": groups, "fold": FOLD_CHARS, "seen": {},
        "prompt": groups[0].prompt if groups else None}, status_code=200 if groups else 404)
