"""Endpoints the worker (or any user script) calls, authenticated by the run's own token.

GPU machines need no database credentials: they claim the run, stream metrics, learn whether
they were asked to stop (in every ingest reply), and report how the training process ended.

The task message carries only a single-use claim ticket; the run token exists only in the claim
reply (and as a hash in the database) and is revoked when the run ends, so a token read from a
broker file, a log or a process listing is worth nothing once its run is over.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, Header, HTTPException, Response, status
from pydantic import ValidationError
from sqlalchemy.orm import Session
from starlette.datastructures import Headers
from starlette.types import Scope

from app.core.db import SessionDep, checkpoint_wal, write
from app.core.json_body import json_body, openapi_body
from app.core.redact import redact_optional
from app.ingest import pipeline
from app.ingest.fast_path import FastRoute
from app.logs import service as log_service
from app.metrics import rollups, settler
from app.runs import lifecycle
from app.runs.models import Run
from app.runs.service import (
    CLAIM_REFUSED,
    ClaimRefused,
    check_claimable,
    claim,
    get_run,
    get_run_for_update,
    seen,
    token_matches,
)
from grpodeck.contract.wire import (
    Claimable,
    ClaimOut,
    ControlOut,
    FinishedIn,
    IngestReply,
    LogBatch,
    LogReply,
    MetricBatch,
    StartedIn,
)

router = APIRouter(prefix="/api/runs", tags=["report"])


def _bearer(authorization: str | None) -> str:
    return (authorization or "").removeprefix("Bearer ").strip()


def _found(run: Run | None, run_id: int) -> Run:
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    return run


def _authorised(run: Run | None, run_id: int, authorization: str | None) -> Run:
    run = _found(run, run_id)
    token = _bearer(authorization)
    if not token or not token_matches(run, token):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong run token")
    return run


def authorised_run(run_id: int, db: SessionDep,
                   authorization: Annotated[str | None, Header()] = None) -> Run:
    return _authorised(get_run(db, run_id), run_id, authorization)


def locked_run(db: Session, run_id: int, authorization: str | None) -> Run:
    """The run, read and locked in one write transaction, for a route that changes it.

    Called from the route's own body, never as a dependency: FastAPI runs a sync dependency and
    the sync route on two separate trips to the request thread pool (40 threads), so a lock
    taken in the dependency was held while the route waited for a thread. With more writers
    than threads, the waiters took every thread and the holder never got one: SQLite stalled
    until the 30 s waits ran out (bench/load.py p99 30-60 s, 500s and 503s). Taken here, the
    lock is held from ``BEGIN IMMEDIATE`` to commit or rollback on one thread."""
    return _authorised(get_run_for_update(db, run_id), run_id, authorization)


RunAuth = Annotated[Run, Depends(authorised_run)]
Authorization = Annotated[str | None, Header()]


def _control(run: Run) -> ControlOut:
    stop = run.cancel_requested_at is not None or run.status in lifecycle.TERMINAL
    return ControlOut(stop=stop, reason=run.stop_reason, status=run.status)


def _transition(change: Callable[[], None]) -> None:
    """Apply a lifecycle change; one the table forbids is a 409 that says why."""
    try:
        change()
    except lifecycle.TransitionError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None


def _require_running(run: Run) -> None:
    """Metrics belong to a running run; a queued or finished one answers 409."""
    if run.status != lifecycle.Status.RUNNING:
        raise HTTPException(status.HTTP_409_CONFLICT, f"run {run.id} is {run.status}, not running")


def _claim_refusal(exc: ClaimRefused) -> HTTPException:
    """The claim's answer, asked or made: one 401 for a wrong ticket and a missing run alike,
    409 once claimed, cancelled or ended."""
    code = status.HTTP_401_UNAUTHORIZED if exc.unauthorised else status.HTTP_409_CONFLICT
    return HTTPException(code, str(exc))


@router.get("/{run_id}/claim", response_model=Claimable)
def claimable(run_id: int, db: SessionDep,
              authorization: Annotated[str | None, Header()] = None) -> Claimable:
    """Bearer: the claim ticket. Whether a claim with it would succeed now, spending nothing
    (``check_claimable``): 200 yes; the claim's own 401 and 409 otherwise."""
    run = get_run(db, run_id)
    try:
        if run is None:
            raise ClaimRefused(CLAIM_REFUSED, unauthorised=True)
        check_claimable(run, _bearer(authorization))
    except ClaimRefused as exc:
        raise _claim_refusal(exc) from None
    return Claimable(claimable=True)


@router.post("/{run_id}/claim", response_model=ClaimOut)
def claim_run(run_id: int, body: StartedIn, db: SessionDep,
              authorization: Annotated[str | None, Header()] = None) -> ClaimOut:
    """Bearer: the claim ticket from the task message. 409 once claimed, cancelled or ended (told
    only to the ticket's holder); a wrong ticket and a missing run get one and the same 401."""
    run = get_run_for_update(db, run_id)  # in the route body: see ``locked_run``
    try:
        if run is None:  # the same answer as a wrong ticket: this route is anonymous
            raise ClaimRefused(CLAIM_REFUSED, unauthorised=True)
        token = claim(db, run, _bearer(authorization), body.pid, body.host)
    except ClaimRefused as exc:
        db.rollback()
        raise _claim_refusal(exc) from None
    db.commit()
    return ClaimOut(token=token, marker_key=run.marker_key, **_control(run).model_dump())


def ingest_batch(db: Session, run_id: int, authorization: str | None,
                 batch: MetricBatch) -> IngestReply:
    """Store one metric batch of a running run and say whether it should stop: the work of
    ``POST /api/runs/{id}/metrics``, whichever way the request came in (the route below, or
    ``fast_metrics`` for a well-formed batch). Refusals raise ``HTTPException``."""
    rows = pipeline.normalized(batch.rows)  # before the lock: nothing to wait for here
    with write(db):
        run = locked_run(db, run_id, authorization)
        _require_running(run)
        accepted = pipeline.receive(db, run, pipeline.read(run, rows), batch.rollouts)
        control = _control(run)
    if accepted:  # committed: the background settler spreads it within a moment
        settler.wake()
    return IngestReply(accepted=accepted, stop=control.stop, reason=control.reason)


def fast_metrics(match: re.Match[str], _: Scope, headers: Headers, body: bytes,
                 db: Session) -> bytes:
    """``post_metrics`` for the fast path (``app.ingest.fast_path``): the batch parsed and
    stored on its one thread trip; what the route would refuse goes the regular way."""
    batch = MetricBatch.model_validate_json(body)
    reply = ingest_batch(db, int(match.group(1)), headers.get("authorization"), batch)
    return reply.model_dump_json().encode()


METRICS_ROUTE = FastRoute(re.compile(r"^/api/runs/(\d{1,18})/metrics$"), fast_metrics,
                          refused=(ValidationError, HTTPException))


@router.post("/{run_id}/metrics", response_model=IngestReply,
             openapi_extra=openapi_body(MetricBatch))
def post_metrics(run_id: int, batch: Annotated[MetricBatch, Depends(json_body(MetricBatch))],
                 db: SessionDep, background: BackgroundTasks,
                 authorization: Authorization = None) -> Response:
    reply = ingest_batch(db, run_id, authorization, batch)
    background.add_task(checkpoint_wal)  # after the reply: the batch is committed already
    # A Response as built: a returned model FastAPI would validate again, and for a sync route
    # on one more trip to the thread pool (``response_model`` stays, for the OpenAPI schema).
    return Response(reply.model_dump_json(), media_type="application/json")


@router.get("/{run_id}/control", response_model=ControlOut)
def control(run: RunAuth, db: SessionDep) -> ControlOut:
    """The supervisor polls this while its child trains: it doubles as the worker's heartbeat."""
    seen(run)
    db.commit()
    return _control(run)


@router.post("/{run_id}/logs", response_model=LogReply)
def post_logs(run_id: int, batch: LogBatch, db: SessionDep,
              authorization: Authorization = None) -> LogReply:
    """The training child's output and stage, shipped by its worker while it runs (and once
    more after it exits, before ``finished``): the run page's stage line and Logs tab."""
    with write(db):
        run = locked_run(db, run_id, authorization)
        _require_running(run)
        stored = log_service.store(db, run, batch, secrets=(_bearer(authorization),))
        seen(run)
    return LogReply(stored=stored)


@router.post("/{run_id}/finished", response_model=ControlOut)
def finished(run_id: int, body: FinishedIn, db: SessionDep,
             authorization: Authorization = None) -> ControlOut:
    with write(db):
        run = locked_run(db, run_id, authorization)
        token = (_bearer(authorization),)  # a run's token is random: redacted by its value
        _transition(lambda: lifecycle.finish(run, body.returncode,
                                             redact_optional(body.error, token),
                                             redact_optional(body.traceback_tail, token)))
        pipeline.observe(db, run, [])  # ended: the whole history is in, findings settle as they are
        rollups.settle(db, run)  # and its points and summaries are spread while the lock is held
    return _control(run)
