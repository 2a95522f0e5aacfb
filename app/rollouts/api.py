"""JSON access to captured rollouts: GET /api/runs/{id}/rollouts?step=N (+ filters)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status

from app.core.db import SessionDep
from app.rollouts import queries
from app.rollouts.queries import RolloutFilter
from app.rollouts.service import captured_steps, nearest_step
from app.runs.lookup import run_or_404
from grpodeck.contract.limits import MAX_STEP

router = APIRouter(prefix="/api/runs", tags=["rollouts"])


def _not_captured(steps: list[int], step: int) -> str:
    """Names the nearest captured step and the span of them (it listed the newest 20, which
    hid older steps and said nothing of the nearest)."""
    if not steps:
        return f"no rollouts captured at step {step}: none were captured for this run"
    return (f"no rollouts captured at step {step}; the nearest captured step is "
            f"{nearest_step(steps, step)} ({len(steps)} captured, steps {steps[0]} to "
            f"{steps[-1]}; 'steps' of GET /api/runs/{{id}}/rollouts lists them)")


def pick_step(steps: list[int], step: int | None, f: RolloutFilter) -> int | None:
    """The latest captured step by default; None (all steps) for a text search without step."""
    if step is not None:
        if step not in steps:
            raise HTTPException(status.HTTP_404_NOT_FOUND, _not_captured(steps, step))
        return step
    if f.q:
        return None
    return steps[-1] if steps else None


@router.get("/{run_id}/rollouts")
def rollouts(run_id: int, db: SessionDep, f: Annotated[RolloutFilter, Query()],
             step: Annotated[int | None, Query(ge=0, lt=MAX_STEP)] = None) -> dict[str, Any]:
    run_or_404(db, run_id)
    steps = captured_steps(db, run_id)
    chosen = pick_step(steps, step, f)
    groups = queries.find_groups(db, run_id, chosen, f) if steps else []
    return {"run_id": run_id, "steps": steps, "step": chosen,
            "groups": [queries.group_dict(g) for g in groups]}


@router.get("/{run_id}/rollouts/prompt/{key}")
def prompt_across_steps(run_id: int, key: str, db: SessionDep) -> dict[str, Any]:
    run_or_404(db, run_id)
    groups = queries.prompt_history(db, run_id, key)
    if not groups:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no captured group has this prompt")
    return {"run_id": run_id, "prompt": groups[0].prompt,
            "groups": [queries.group_dict(g) for g in groups]}
