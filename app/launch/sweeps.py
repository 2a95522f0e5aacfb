"""Sweeps: one spec launched once per group size, and a page overlaying the runs.

``POST /api/sweeps`` checks every variant before launching any (a sweep is all or nothing),
then launches each through the same path as the form (``app.launch.launch``), tagging each run
with the sweep's id. ``GET /sweeps/{id}`` reuses the compare page's overlay for the three curves
the group-size experiment reads: reward, its spread within groups, and the share of groups with
no spread at all (those teach nothing).
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select

from app.auth.identity import CurrentIdentity
from app.compare.view_settings import ViewSettings
from app.compare.views import MAX_RUNS, compare_context
from app.core.db import SessionDep
from app.core.templating import templates
from app.launch import gate
from app.launch.launch import launch_sweep
from app.runs.models import Run
from grpodeck.contract.spec import RunSpec

api = APIRouter(prefix="/api/sweeps", tags=["sweeps"])
pages = APIRouter(include_in_schema=False)

SWEEP_METRICS = ("reward", "reward_std", "frac_reward_zero_std")


class SweepIn(BaseModel):
    """A spec and the group sizes to launch it with (2 to 8 distinct values)."""

    model_config = ConfigDict(extra="forbid")

    spec: RunSpec
    num_generations: list[Annotated[int, Field(ge=2, le=64)]] = Field(  # RunSpec's G bounds
        min_length=2, max_length=MAX_RUNS)


class SweepRunOut(BaseModel):
    id: int
    num_generations: int
    status: str
    url: str


class SweepOut(BaseModel):
    sweep_id: str
    url: str
    runs: list[SweepRunOut]


def variants(base: RunSpec, values: list[int]) -> list[RunSpec]:
    """One spec per group size, each validated; a 422 naming the value that cannot run. A batch
    size set in the base spec is kept when it holds whole groups of every size (16 for 2, 8 and
    16: every run then sees as many completions per step, and the zero-spread shares compare
    like for like); otherwise it is dropped and each run steps one group."""
    if len(set(values)) != len(values):
        raise HTTPException(422, "num_generations: each value once (got "
                                 f"{', '.join(map(str, values))})")
    data = base.model_dump(mode="json")
    batch = base.per_device_train_batch_size
    keep = batch if batch is not None and all(batch % g == 0 for g in values) else None
    specs = []
    for g in values:
        try:
            specs.append(RunSpec.model_validate({
                **data, "num_generations": g, "per_device_train_batch_size": keep,
                "name": f"{base.name} G={g}"[:120]}))
        except ValidationError as exc:
            reasons = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise HTTPException(422, f"num_generations={g}: {reasons}") from None
    return specs


@api.post("", status_code=status.HTTP_201_CREATED, response_model=SweepOut)
def create_sweep(body: SweepIn, db: SessionDep, identity: CurrentIdentity) -> SweepOut:
    """Launch the spec once per ``num_generations`` value, all under one sweep id: every
    variant passes the launch gate before any is stored (all or nothing)."""
    specs = variants(body.spec, body.num_generations)
    sweep_id = secrets.token_hex(6)
    try:
        runs = launch_sweep(db, specs, created_by=identity.user_id, sweep_id=sweep_id)
    except gate.LaunchRefused as refused:
        raise refused.validation_error(("body", "spec")) from None
    return SweepOut(sweep_id=sweep_id, url=f"/sweeps/{sweep_id}", runs=[
        SweepRunOut(id=r.id, num_generations=r.spec["num_generations"], status=r.status,
                    url=f"/runs/{r.id}") for r in runs])


def sweep_runs(db: SessionDep, sweep_id: str) -> list[Run]:
    """The sweep's runs in launch order; 404 when there are none."""
    runs = list(db.scalars(select(Run).where(Run.sweep_id == sweep_id[:32]).order_by(Run.id)))
    if not runs:
        raise HTTPException(404, f"sweep {sweep_id[:40]!r} not found")
    return runs


@pages.get("/sweeps/{sweep_id}", response_class=HTMLResponse)
def sweep_page(sweep_id: str, request: Request, db: SessionDep) -> Response:
    runs = sweep_runs(db, sweep_id)
    context: dict[str, Any] = compare_context(db, runs, SWEEP_METRICS, ViewSettings())
    context["sweep_id"] = runs[0].sweep_id
    return templates.TemplateResponse(request, "sweeps/detail.html", context)
