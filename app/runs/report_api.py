"""Endpoints the worker (or any user script) calls, authenticated by the run's own token.

GPU machines need no database credentials: they claim the run, stream metrics, learn whether
they were asked to stop (in every ingest reply), and report how the training process ended.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, status
from pydantic import BaseModel

from app.core.db import SessionDep
from app.health import service as health
from app.metrics import pipeline
from app.metrics.schemas import IngestReply, MetricBatch
from app.runs import lifecycle
from app.runs.models import Run
from app.runs.service import get_run, token_matches

router = APIRouter(prefix="/api/runs", tags=["report"])


def authorised_run(run_id: int, db: SessionDep,
                   authorization: Annotated[str | None, Header()] = None) -> Run:
    run = get_run(db, run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    token = (authorization or "").removeprefix("Bearer ").strip()
    if not token or not token_matches(run, token):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong run token")
    return run


RunAuth = Annotated[Run, Depends(authorised_run)]


class StartedIn(BaseModel):
    pid: int | None = None
    host: str | None = None


class FinishedIn(BaseModel):
    returncode: int
    error: str | None = None
    traceback_tail: str | None = None


class ControlOut(BaseModel):
    stop: bool
    reason: str | None = None
    status: str


def _control(run: Run) -> ControlOut:
    stop = run.cancel_requested_at is not None or run.status in lifecycle.TERMINAL
    return ControlOut(stop=stop, reason=run.stop_reason, status=run.status)


@router.post("/{run_id}/started", response_model=ControlOut)
def started(body: StartedIn, run: RunAuth, db: SessionDep) -> ControlOut:
    try:
        lifecycle.start(run, body.pid, body.host)
    except lifecycle.TransitionError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    db.commit()
    return _control(run)


@router.post("/{run_id}/metrics", response_model=IngestReply)
def post_metrics(batch: MetricBatch, run: RunAuth, db: SessionDep) -> IngestReply:
    if run.status != lifecycle.Status.RUNNING:
        raise HTTPException(status.HTTP_409_CONFLICT, f"run {run.id} is {run.status}, not running")
    accepted = pipeline.receive(db, run, pipeline.normalized(batch.rows), batch.rollouts)
    db.commit()
    control = _control(run)
    return IngestReply(accepted=accepted, stop=control.stop, reason=control.reason)


@router.get("/{run_id}/control", response_model=ControlOut)
def control(run: RunAuth) -> ControlOut:
    return _control(run)


@router.post("/{run_id}/finished", response_model=ControlOut)
def finished(body: FinishedIn, run: RunAuth, db: SessionDep) -> ControlOut:
    try:
        lifecycle.finish(run, body.returncode, body.error, body.traceback_tail)
    except lifecycle.TransitionError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    health.observe(db, run, [])  # ended: the whole history is in, findings settle as they are
    db.commit()
    return _control(run)
