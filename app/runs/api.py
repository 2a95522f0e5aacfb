"""JSON API for scripts and other tools (OpenAPI at /docs)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response, status

from app.auth.identity import CurrentIdentity, require_manage
from app.core.db import SessionDep
from app.metrics.series import downsample, load_series
from app.runs import lifecycle, listing, service
from app.runs.launch import launch
from app.runs.models import Run
from app.runs.schemas import LaunchedOut, RunOut
from app.runs.spec import RunSpec

router = APIRouter(prefix="/api/runs", tags=["runs"])


def run_or_404(db: SessionDep, run_id: int) -> Run:
    run = service.get_run(db, run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    return run


@router.post("", status_code=status.HTTP_201_CREATED, response_model=LaunchedOut)
def create(spec: RunSpec, db: SessionDep, identity: CurrentIdentity) -> LaunchedOut:
    run = launch(db, spec, created_by=identity.user_id)
    return LaunchedOut(id=run.id, status=run.status, url=f"/runs/{run.id}")


@router.get("", response_model=list[RunOut])
def list_all(request: Request, response: Response, db: SessionDep) -> list[RunOut]:
    """Runs, newest first: the runs list's filters and pages as query parameters (``status``,
    ``source``, ``verdict``, ``model``, ``dataset``, ``reward``, ``tag``, ``q``, ``archived``=
    active|archived|all, ``sort``, ``page``, ``per_page`` up to 200, default 200). The total
    matching count is in the ``X-Total-Count`` header."""
    params = dict(request.query_params)
    params.setdefault("per_page", str(listing.MAX_PER_PAGE))
    try:
        query = listing.ListQuery.parse(params)
    except listing.ListError as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    page = listing.page_of_runs(db, query)
    response.headers["X-Total-Count"] = str(page.total)
    return [RunOut.of(r) for r in page.runs]


@router.get("/{run_id}", response_model=RunOut)
def get_one(run_id: int, db: SessionDep) -> RunOut:
    return RunOut.of(run_or_404(db, run_id))


@router.post("/{run_id}/cancel", response_model=RunOut,
             responses={403: {"description": "only the run's creator or an admin may cancel"}})
def cancel(run_id: int, db: SessionDep, identity: CurrentIdentity) -> RunOut:
    run = run_or_404(db, run_id)
    require_manage(identity, run)
    try:
        lifecycle.request_cancel(run)
    except lifecycle.TransitionError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    db.commit()
    return RunOut.of(run)


def deletion_refusal(run: Run) -> str | None:
    if lifecycle.is_live(run):
        return f"run {run.id} is {run.status}: cancel it before deleting it"
    return None


@router.delete("/{run_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response,
               responses={403: {"description": "only the run's creator or an admin may delete"},
                          409: {"description": "the run is still queued or running"}})
def remove(run_id: int, db: SessionDep, identity: CurrentIdentity) -> Response:
    """Delete a finished run with its metrics, findings and rollouts."""
    run = run_or_404(db, run_id)
    require_manage(identity, run)
    if (reason := deletion_refusal(run)) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, reason)
    service.delete_run(db, run)
    db.commit()
    service.remove_files(run_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{run_id}/metrics")
def metrics(run_id: int, db: SessionDep,
            names: Annotated[str | None, Query(description="comma-separated metric names")] = None,
            max_points: Annotated[int | None, Query(ge=3, le=1_000_000)] = None,
            after: Annotated[int | None, Query(ge=-1, lt=2**31,
                                               description="only steps after this one")] = None,
            ) -> dict[str, dict[str, list[float | int | str | None]]]:
    """Per metric name: steps and values (NaN/inf as strings). ``max_points`` downsamples;
    ``after`` returns only newer steps (what a live chart appends)."""
    run_or_404(db, run_id)
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    series = load_series(db, run_id, wanted, after)
    limit = max_points or 0
    return {name: (downsample(s, limit) if limit else s).to_json() for name, s in series.items()}
