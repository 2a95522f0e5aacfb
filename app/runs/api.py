"""JSON API for scripts and other tools (OpenAPI at /docs)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import Discriminator, Tag

from app.auth.identity import CurrentIdentity, require_manage
from app.core.db import SessionDep
from app.core.errors import BODY_UNION_TAGS
from app.datasets.columns import missing_column_problem
from app.metrics.rollups import catch_up, chart_data
from app.metrics.series import downsample, load_series
from app.runs import lifecycle, listing, service
from app.runs.capabilities import refuse_devices, vllm_problem
from app.runs.launch import check_destinations, launch
from app.runs.models import Run
from app.runs.schemas import LaunchedOut, RunOut
from grpodeck.contract.spec import RunSpec
from grpodeck.contract.wire import ExternalRunIn, ExternalRunOut

router = APIRouter(prefix="/api/runs", tags=["runs"])


def run_or_404(db: SessionDep, run_id: int) -> Run:
    run = service.get_run(db, run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    return run


def _kind(body: Any) -> str:
    """A body naming a ``source`` registers a run trained elsewhere; any other is a launch spec."""
    return "external" if isinstance(body, dict) and "source" in body else "launch"


NewRun = Annotated[Annotated[ExternalRunIn, Tag("external")] | Annotated[RunSpec, Tag("launch")],
                   Discriminator(_kind)]
BODY_UNION_TAGS.update(("external", "launch"))  # errors name ["body", "rewards"], not the tag


@router.post("", status_code=status.HTTP_201_CREATED,
             response_model=LaunchedOut | ExternalRunOut,
             responses={201: {"description": "a launch spec answers {id, status, url}; "
                              "{\"source\": \"external\", ...} answers {id, token, url}"}})
def create(body: Annotated[NewRun, Body()], request: Request, db: SessionDep,
           identity: CurrentIdentity) -> LaunchedOut | ExternalRunOut:
    """Launch a run on the workers, or register one a script trains itself (queues nothing:
    the reply's token is the run token the report endpoints take)."""
    if isinstance(body, ExternalRunIn):
        return _register_external(body, request, db, identity.user_id)
    if (problem := missing_column_problem(body) or vllm_problem(body)) is not None:
        raise HTTPException(422, problem)
    refuse_devices(body)
    run = launch(db, body, created_by=identity.user_id)
    return LaunchedOut(id=run.id, status=run.status, url=f"/runs/{run.id}")


def _external_tags(body: ExternalRunIn) -> list[str]:
    """The body's tags plus ``group:NAME``, by the runs list's tag rules (else a 422)."""
    names = [*body.tags, *([f"group:{body.group}"] if body.group else [])]
    try:
        for name in names:  # each tag is one word: "a b" is refused, not split into two
            if not listing.TAG_RE.match(name.strip().lower()):
                raise listing.ListError(f"tag {name[:50]!r}: use 1-40 letters, digits, '.', "
                                        "'_', ':' or '-'")
        return listing.parse_tags(",".join(names))
    except listing.ListError as exc:
        raise RequestValidationError([{"type": "value_error", "msg": str(exc),
                                       "loc": ("body", "group" if body.group and not
                                               body.tags else "tags"),
                                       "input": names}]) from None


def _register_external(body: ExternalRunIn, request: Request, db: SessionDep,
                       user_id: int | None) -> ExternalRunOut:
    """A run a script trains itself, with the tags, group and alert rules it asked for."""
    run, token = register_external(body, db, user_id)
    db.commit()
    url = f"{str(request.base_url).rstrip('/')}/runs/{run.id}"
    return ExternalRunOut(id=run.id, token=token, url=url)


def register_external(body: ExternalRunIn, db: SessionDep,
                      user_id: int | None) -> tuple[Run, str]:
    """Store an outside run with its tags, group and alert rules (flushed, not committed): the
    one way every reporting path (this API, the MLflow-compatible one) creates it."""
    tags = _external_tags(body)
    spec = dict(body.spec)
    if body.alerts is not None:
        check_destinations(body.alerts.urls)
        spec["alerts"] = body.alerts.model_dump(mode="json")
    if body.group:
        spec["group"] = body.group
    run, token = service.create_external_run(db, name=body.name, spec=spec, created_by=user_id)
    if tags:
        listing.set_tags(db, run, tags)
    return run, token


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
    catch_up(db, run_or_404(db, run_id))
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    series = load_series(db, run_id, wanted, after)
    limit = max_points or 0
    return {name: (downsample(s, limit) if limit else s).to_json() for name, s in series.items()}


@router.get("/{run_id}/chart")
def chart(run_id: int, db: SessionDep,
          names: Annotated[str | None, Query(description="comma-separated metric names")] = None,
          x0: Annotated[int | None, Query(ge=0, lt=2**31, description="first step")] = None,
          x1: Annotated[int | None, Query(ge=0, lt=2**31, description="last step")] = None,
          max_points: Annotated[int, Query(ge=8, le=20_000)] = 2_000,
          ) -> JSONResponse:
    """Chart data for steps ``x0..x1`` (a zoomed chart's visible range; default the whole run)
    at the finest resolution that fits ``max_points`` per metric: raw points (level 0) or, per
    bucket of ``width`` steps, its min and max (NaN/inf as strings, one per bucket that had
    any). ``last_step`` is where a live poll (``metrics?after=``) resumes."""
    run = run_or_404(db, run_id)
    if x0 is not None and x1 is not None and x1 < x0:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            f"x1 ({x1}) is before x0 ({x0})")
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    data = chart_data(db, run, max_points, wanted, x0, x1)
    # a JSONResponse as is: FastAPI's encoder walks every number of a 50k-point answer first
    return JSONResponse({"level": data.level, "width": data.width, "last_step": data.last_step,
                         "series": {name: s.to_json() for name, s in data.series.items()}})
