"""The rollout inspector: /runs/{id}/rollouts (filters swap the groups with htmx)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.charts.rollout_figures import advantages_figure, outcomes_figure
from app.core.db import SessionDep
from app.core.templating import templates
from app.rollouts import queries
from app.rollouts.api import pick_step
from app.rollouts.queries import RolloutFilter
from app.rollouts.service import captured_steps
from app.runs.api import run_or_404

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
FOLD_CHARS = 600


def _groups_context(db: SessionDep, run_id: int, step: int | None, f: RolloutFilter
                    ) -> dict[str, Any]:
    steps = captured_steps(db, run_id)
    chosen = pick_step(steps, step, f) if steps else None
    groups = queries.find_groups(db, run_id, chosen, f) if steps else []
    components = sorted({name for g in groups for c in g.completions
                         for name in (c.get("rewards") or {})})
    return {"steps": steps, "step": chosen, "groups": groups, "filter": f,
            "components": components, "fold": FOLD_CHARS}


@router.get("/runs/{run_id}/rollouts", response_class=HTMLResponse)
def inspector(run_id: int, request: Request, db: SessionDep,
              f: Annotated[RolloutFilter, Query()], step: StepParam = None) -> Response:
    run = run_or_404(db, run_id)
    charts = [c for c in (outcomes_figure(queries.outcome_shares(db, run_id)),
                          advantages_figure(queries.advantages_by_step(db, run_id))) if c]
    return templates.TemplateResponse(request, "rollouts/inspector.html", {
        "run": run, "charts": charts, **_groups_context(db, run_id, step, f)})


@router.get("/runs/{run_id}/rollouts/_groups", response_class=HTMLResponse)
def groups_fragment(run_id: int, request: Request, db: SessionDep,
                    f: Annotated[RolloutFilter, Query()], step: StepParam = None) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "rollouts/_groups.html", {
        "run": run, **_groups_context(db, run_id, step, f)})


@router.get("/runs/{run_id}/rollouts/prompt/{key}", response_class=HTMLResponse)
def prompt_page(run_id: int, key: str, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    groups = queries.prompt_history(db, run_id, key)
    return templates.TemplateResponse(request, "rollouts/prompt.html", {
        "run": run, "groups": groups, "fold": FOLD_CHARS,
        "prompt": groups[0].prompt if groups else None}, status_code=200 if groups else 404)
