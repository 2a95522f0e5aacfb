"""JSON API for dry runs: ``GET /api/dry-runs/{id}`` (the result once the worker answered). (``POST /api/dry-runs``, a spec in and an id out, is a launch entrance: ``app.launch.api``.)
The worker posts its scores to
``POST /api/dry-runs/{id}/result`` with the single-use ticket its task message carried."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, status

from app.core.db import SessionDep
from app.dryruns import service
from app.dryruns.models import DryRun
from app.dryruns.schemas import DryRunAliveIn, DryRunResultIn
from grpodeck.contract.alerts import masked_spec

router = APIRouter(prefix="/api/dry-runs", tags=["dry runs"])
report_router = APIRouter(prefix="/api/dry-runs", tags=["report"])

DEFAULT_PROMPTS, MAX_PROMPTS = 4, 16


def dry_run_or_404(db: SessionDep, dry_run_id: int) -> DryRun:
    dry = service.get(db, dry_run_id)
    if dry is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"dry run {dry_run_id} not found")
    return dry


def ticketed(db: SessionDep, dry_run_id: int) -> DryRun | None:
    """The dry run a ticket route names, or None; these routes are open to anyone (the ticket
    is their credential), so a missing id must get the same 401 as a wrong ticket: a 404
    told anonymous callers which ids exist (issue 55)."""
    return service.get(db, dry_run_id)


def as_json(dry: DryRun) -> dict[str, Any]:
    """The record with its result's fields at the top level (``zero_spread_share``,
    ``rewards``, ``verdict``, ...); null while the worker has not answered."""
    result = dry.result or {}
    return {"id": dry.id, "status": dry.status, "url": f"/dry-runs/{dry.id}", "spec": masked_spec(dry.spec),
            "created_at": dry.created_at, "finished_at": dry.finished_at, "error": dry.error,
            "started_at": dry.started_at, "last_seen_at": dry.last_seen_at, "worker": dry.worker,
            "zero_spread_share": result.get("zero_spread_share"),
            "rewards": result.get("rewards"), "verdict": result.get("verdict"),
            "result": dry.result}


@router.get("/{dry_run_id}")
def get_one(dry_run_id: int, db: SessionDep) -> dict[str, Any]:
    return as_json(dry_run_or_404(db, dry_run_id))


@report_router.post("/{dry_run_id}/result", status_code=status.HTTP_204_NO_CONTENT,
                    responses={401: {"description": "wrong or spent ticket"}})
def result(dry_run_id: int, body: DryRunResultIn, db: SessionDep,
           authorization: Annotated[str | None, Header()] = None) -> None:
    """The worker's scores (or the error that stopped it); accepted once. A missing dry run
    gets the wrong ticket's 401 (``ticketed``)."""
    dry = ticketed(db, dry_run_id)
    ticket = (authorization or "").removeprefix("Bearer ").strip()
    if dry is None or not service.accept_result(db, dry, ticket, body.model_dump()):
        db.rollback()
        raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                            f"dry run {dry_run_id}: wrong ticket, or its result is already in")
    db.commit()


@report_router.post("/{dry_run_id}/alive", status_code=status.HTTP_204_NO_CONTENT,
                    responses={401: {"description": "wrong or spent ticket: the dry run is over"}})
def alive(dry_run_id: int, body: DryRunAliveIn, db: SessionDep,
          authorization: Annotated[str | None, Header()] = None) -> None:
    """The worker started this dry run, or still samples it (every few seconds): a dry run
    whose worker goes silent is failed by the scheduler (``app.dryruns.lost``). 401 tells a
    worker holding a redelivered message that the dry run is over: it must not sample."""
    dry = ticketed(db, dry_run_id)
    ticket = (authorization or "").removeprefix("Bearer ").strip()
    if dry is None or not service.mark_alive(dry, ticket, body.worker):
        db.rollback()
        raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                            f"dry run {dry_run_id}: wrong ticket, or the dry run is over")
    db.commit()
