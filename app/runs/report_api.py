"""Endpoints the worker (or any user script) calls, authenticated by the run's own token.

GPU machines need no database credentials: they claim the run, stream metrics, learn whether
they were asked to stop (in every ingest reply), and report how the training process ended.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, status
from pydantic import BaseModel, Field

from app.core.db import SessionDep
from app.core.fields import CleanText
from app.metrics import pipeline
from app.metrics.schemas import IngestReply, MetricBatch
from app.runs import lifecycle
from app.runs.models import Run
from app.runs.service import get_run, get_run_for_update, token_matches

router = APIRouter(prefix="/api/runs", tags=["report"])


def _authorised(run: Run | None, run_id: int, authorization: str | None) -> Run:
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    token = (authorization or "").removeprefix("Bearer ").strip()
    if not token or not token_matches(run, token):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong run token")
    return run


def authorised_run(run_id: int, db: SessionDep,
                   authorization: Annotated[str | None, Header()] = None) -> Run:
    return _authorised(get_run(db, run_id), run_id, authorization)


def authorised_run_for_update(run_id: int, db: SessionDep,
                              authorization: Annotated[str | None, Header()] = None) -> Run:
    """For endpoints that change the run: it is read and locked in one write transaction."""
    return _authorised(get_run_for_update(db, run_id), run_id, authorization)


RunAuth = Annotated[Run, Depends(authorised_run)]
RunForUpdate = Annotated[Run, Depends(authorised_run_for_update)]


class StartedIn(BaseModel):
    pid: int | None = Field(None, ge=0, lt=2**31, description="a process id (pid_t)")
    host: CleanText(255) | None = None


class FinishedIn(BaseModel):
    returncode: int = Field(ge=-(2**31), lt=2**31, description="an exit status or -signal")
    error: CleanText(16_000) | None = None
    traceback_tail: CleanText(64_000, keep_tail=True) | None = None


class ControlOut(BaseModel):
    stop: bool
    reason: str | None = None
    status: str


def _control(run: Run) -> ControlOut:
    stop = run.cancel_requested_at is not None or run.status in lifecycle.TERMINAL
    return ControlOut(stop=stop, reason=run.stop_reason, status=run.status)


@router.post("/{run_id}/started", response_model=ControlOut)
def started(body: StartedIn, run: RunForUpdate, db: SessionDep) -> ControlOut:
    try:
        lifecycle.start(run, body.pid, body.host)
    except lifecycle.TransitionError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    db.commit()
    return _control(run)


@router.post("/{run_id}/metrics", response_model=IngestReply)
def post_metrics(batch: MetricBatch, run: RunForUpdate, db: SessionDep) -> IngestReply:
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
def finished(body: FinishedIn, run: RunForUpdate, db: SessionDep) -> ControlOut:
    try:
        lifecycle.finish(run, body.returncode, body.error, body.traceback_tail)
    except lifecycle.TransitionError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    db.commit()
    return _control(run)
