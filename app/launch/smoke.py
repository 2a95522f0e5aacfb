"""Smoke tests: a handful of steps of a spec, then a plain answer (do rewards vary within
groups, do the curves move?) and one button that launches the full run unchanged.

A smoke run is an ordinary run whose ``smoke_full_steps`` holds the full run's max_steps; the
full run is the same spec with that max_steps, and remembers the smoke run as its parent.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.auth.identity import CurrentIdentity, Identity
from app.core.db import SessionDep
from app.core.templating import templates
from app.launch.answers import Answers
from app.launch.gate import LaunchRefused
from app.launch.launch import launch
from app.launch.ownership import own_spec
from app.metrics import waiting
from app.metrics.series import load_series
from app.runs import lifecycle
from app.runs.lookup import run_or_404
from app.runs.models import Run
from grpodeck.contract.spec import RunSpec

router = APIRouter(include_in_schema=False)

DEFAULT_STEPS, MAX_STEPS = 5, 50
SPREAD = ("reward_std",)
ZERO_SHARE = "frac_reward_zero_std"
MOVING = ("reward", "loss", "kl", "entropy", "completions/mean_length")
EPS = 1e-9


def smoke_steps(raw: str | None) -> int:
    """The form's step count; a clear error instead of a guess."""
    if raw in (None, ""):
        return DEFAULT_STEPS
    try:
        steps = int(raw)
    except ValueError:
        raise ValueError(f"smoke test steps must be a whole number, not {raw[:20]!r}") from None
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"smoke test steps must be between 1 and {MAX_STEPS}")
    return steps


def launch_smoke(db: Session, spec: RunSpec, steps: int, created_by: int | None,
                 parent_id: int | None = None, answers: Answers | None = None) -> Run:
    """``parent_id``: the run the form cloned (a smoke test of a clone or of a fix);
    ``answers``: the finding a fix's smoke test answers (its full run answers it too)."""
    smoke = spec.model_copy(update={"max_steps": min(steps, spec.max_steps)})
    return launch(db, smoke, created_by=created_by, smoke_full_steps=spec.max_steps,
                  parent_id=parent_id, answers=answers)


def launch_full(db: Session, smoke: Run, identity: Identity) -> Run:
    """The smoke test's spec with the full max_steps; launched by anyone but the smoke test's
    owner, without the owner's alert destinations."""
    spec = RunSpec.model_validate({**own_spec(smoke.spec, smoke, identity),
                                   "max_steps": smoke.smoke_full_steps})
    return launch(db, spec, created_by=identity.user_id, parent_id=smoke.id,
                  answers=Answers.carried(smoke))


def _finite(values: list[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def report(db: Session, run: Run) -> dict[str, Any]:
    """{steps, rewards_vary, curves_move, moved, verdict, text}; the two answers are None
    until a step is logged."""
    wanted = [*SPREAD, ZERO_SHARE, *MOVING]
    pending = waiting.by_name(waiting.rows(db, run), wanted)  # before the settled points
    series = waiting.merge(load_series(db, run.id, wanted), pending)
    steps = max((s.steps[-1] for s in series.values() if s.steps), default=0)
    if not steps:
        return {"steps": 0, "rewards_vary": None, "curves_move": None, "moved": [],
                "verdict": "waiting", "text": "waiting for the first logged step"}
    spreads = [v for n in SPREAD if n in series for v in _finite(series[n].values)]
    zero = _finite(series[ZERO_SHARE].values) if ZERO_SHARE in series else []
    vary = any(v > EPS for v in spreads) or any(v < 1 - EPS for v in zero)
    moved = [n for n in MOVING if n in series
             and len(vals := _finite(series[n].values)) > 1 and max(vals) - min(vals) > EPS]
    done = not lifecycle.is_live(run)
    if vary and moved:
        verdict, text = "ok", "rewards vary within groups and the curves move: launch the full run"
    elif not vary:
        verdict, text = "no_variation", ("no reward spread within any group so far: the full "
                                         "run would not learn; fix the reward first")
    else:
        verdict, text = "flat", "rewards vary but no curve moved yet"
    if not done and verdict != "ok":
        verdict, text = "waiting", f"so far ({steps} steps): {text}"
    return {"steps": steps, "rewards_vary": vary, "curves_move": bool(moved), "moved": moved,
            "verdict": verdict, "text": text}


def smoke_context(db: Session, run: Run) -> dict[str, Any]:
    return {"smoke": report(db, run) if run.smoke_full_steps else None}


@router.get("/runs/{run_id}/_smoke", response_class=HTMLResponse)
def smoke_panel(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_smoke.html",
                                      {"run": run, "live": lifecycle.is_live(run),
                                       **smoke_context(db, run)})


@router.post("/runs/{run_id}/launch-full", response_class=HTMLResponse)
def launch_full_run(run_id: int, db: SessionDep, identity: CurrentIdentity) -> Response:
    """The smoke test's one button: the same spec with the full max_steps."""
    smoke = run_or_404(db, run_id)
    if not smoke.smoke_full_steps:
        return HTMLResponse(f'<div class="alert critical">run {run_id} is not a smoke test</div>',
                            status_code=409)
    try:
        run = launch_full(db, smoke, identity)
    except LaunchRefused as refused:
        return HTMLResponse(f'<div class="alert critical">{escape(str(refused))}</div>',
                            status_code=422)
    return RedirectResponse(f"/runs/{run.id}", status_code=303)
