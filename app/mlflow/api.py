"""The routes: just what ``mlflow.set_experiment``, ``start_run``, ``log_param(s)``,
``log_metric(s)``, ``set_tag(s)``, ``end_run`` and transformers' ``MLflowCallback`` call
(``mlflow/store/tracking/rest_store.py``). Anything else under ``/mlflow`` is MLflow's 404.

Each MLflow run is an outside run made by ``app.ingest.external.register_external``; its
metrics go through ``app.ingest.pipeline.receive`` like a worker's. Writes take the run's row lock
(``get_run_for_update``) as the report API does, and need the caller to own the run.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.datastructures import Headers
from starlette.types import Scope

from app.auth.identity import Identity
from app.auth.middleware import identify
from app.core.db import SessionDep, write
from app.core.json_body import NotJson, loads
from app.ingest import pipeline
from app.ingest.external import register_external
from app.ingest.fast_path import FastRoute, Handover
from app.listing import service as listing
from app.mlflow import errors, mapping, run_names
from app.mlflow.auth import Caller, header_key
from app.mlflow.errors import MlflowError, invalid, missing
from app.mlflow.wire import (
    CreateExperiment,
    CreateRun,
    LogBatch,
    LogMetric,
    LogOne,
    UpdateRun,
    experiment_json,
    parse,
    run_info,
    run_json,
)
from app.runs import lifecycle, service
from app.runs.models import Run, RunTag
from grpodeck.contract.wire import ExternalRunIn

router = APIRouter(prefix="/mlflow", tags=["mlflow"], include_in_schema=False)
# The routes return MLflow's JSON as dicts with ``response_model=None``: FastAPI would otherwise
# validate each returned dict against its annotation, for a sync route on one more trip to the
# thread pool (a logged step per request is TRL's ``report_to="mlflow"``).
API = "/api/2.0/mlflow"


async def _body(request: Request) -> Any:
    """The JSON body, read here so that a bad one is MLflow's 400 with the reason (too deep, a
    number past the digit limit: ``json_body.loads``), not the app's 422 or a 500."""
    try:
        return loads(await request.body() or b"{}")
    except NotJson as exc:
        raise invalid(f"the request body is not JSON this API reads: {exc.why}") from None


Body = Annotated[Any, Depends(_body)]


def _query(request: Request, name: str) -> str:
    """A GET parameter the client sends (as protobuf JSON fields turned into a query)."""
    value = request.query_params.get(name)
    if not value:
        raise invalid(f"missing value for required parameter {name!r}")
    return value


def _group(experiment_id: str) -> str | None:
    try:
        return mapping.group_of_id(experiment_id)
    except ValueError:
        raise missing(f"no experiment with id {experiment_id[:60]!r}") from None


def _tags_of(db: Session, run: Run) -> list[str]:
    return list(db.scalars(select(RunTag.tag).where(RunTag.run_id == run.id)
                           .order_by(RunTag.tag)))


def _run(db: Session, run_id: str, *, for_update: bool = False) -> Run:
    run = None
    if run_id.isdigit() and len(run_id) < 11:
        getter = service.get_run_for_update if for_update else service.get_run
        run = getter(db, int(run_id))
    if run is None:
        raise missing(f"no run with id {run_id[:60]!r}")
    return run


def _writable(db: Session, run_id: str, caller: Identity) -> Run:
    """The run, locked, when the caller may report to it: an outside run of theirs, running."""
    run = _run(db, run_id, for_update=True)
    if (reason := caller.manage_refusal(run)) is not None:
        raise MlflowError(403, "PERMISSION_DENIED", reason)
    if run.source != "external":
        raise MlflowError(400, "INVALID_STATE", f"run {run.id} was launched by the Deck: its "
                          "worker reports it, not an MLflow client")
    if run.status != lifecycle.Status.RUNNING:
        raise MlflowError(400, "INVALID_STATE", f"run {run.id} is {run.status}, not running")
    service.seen(run)  # an MLflow client sends no heartbeat: each write is its sign of life
    return run


def _validated_spec(run: Run, spec: dict[str, Any]) -> dict[str, Any]:
    """The config by the outside-run rules (typed keys, sizes), else MLflow's 400."""
    try:
        return ExternalRunIn(source="external", name=run.name, spec=spec).spec
    except ValidationError as exc:
        first = exc.errors()[0]
        raise invalid(f"params: {first['msg']}") from None


def _apply(db: Session, run: Run, body: LogBatch) -> None:
    """Params, tags and metrics of one batch, in that order (as MLflow stores them)."""
    if body.params:
        added = mapping.params_to_spec((p.key, p.value) for p in body.params)
        run.spec = _validated_spec(run, {**(run.spec or {}), **added})
        max_steps = run.spec.get("max_steps")
        if isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps > 0:
            run.max_steps = max_steps
    if body.tags:
        _set_tags(db, run, mapping.TagChanges((t.key, t.value) for t in body.tags))
    if body.metrics:
        rows = mapping.metric_rows((m.key, m.value, m.step) for m in body.metrics)
        pipeline.receive(db, run, pipeline.read(run, rows))


def _set_tags(db: Session, run: Run, changes: mapping.TagChanges) -> None:
    if changes.name is not None and (name := mapping.run_name(changes.name)):
        run.name = name
    try:
        if changes.note is not None:
            listing.set_note(run, changes.note)
        if changes.tags:
            merged = changes.merged_into(_tags_of(db, run))
            listing.set_tags(db, run, listing.parse_tags(",".join(merged)))
    except listing.ListError as exc:
        raise invalid(str(exc)) from None


# --- experiments: the Deck's groups (a group exists as soon as a run names it) ---

@router.get(f"{API}/experiments/get-by-name", response_model=None)
def experiment_by_name(_: Caller, request: Request) -> dict[str, Any]:
    name = _query(request, "experiment_name")
    return {"experiment": experiment_json(mapping.group_of(name))}


@router.get(f"{API}/experiments/get", response_model=None)
def experiment(_: Caller, request: Request) -> dict[str, Any]:
    return {"experiment": experiment_json(_group(_query(request, "experiment_id")))}


@router.post(f"{API}/experiments/create", response_model=None)
def create_experiment(_: Caller, body: Body) -> dict[str, Any]:
    return {"experiment_id": mapping.experiment_id_of(
        mapping.group_of(parse(CreateExperiment, body).name))}


# --- runs ---

def _name_taken(db: Session, name: str) -> bool:
    """Whether a run of the Deck is called ``name`` already."""
    return db.scalar(select(Run.id).where(Run.name == name).limit(1)) is not None


@router.post(f"{API}/runs/create", response_model=None)
def create_run(caller: Caller, body: Body, db: SessionDep) -> dict[str, Any]:
    new = parse(CreateRun, body)
    group = _group(new.experiment_id)
    changes = mapping.TagChanges((t.key, t.value) for t in new.tags)
    name = (mapping.run_name(new.run_name) or mapping.run_name(changes.name)
            or run_names.unused_name(lambda n: _name_taken(db, n)))
    try:
        external = ExternalRunIn(source="external", name=name, group=group,
                                 tags=list(changes.tags.values()))
        run, _ = register_external(external, db, caller.user_id)
    except (ValidationError, RequestValidationError) as exc:
        raise invalid(f"tags: {exc.errors()[0]['msg']}") from None
    if changes.note:
        _set_tags(db, run, mapping.TagChanges([(mapping.NOTE_TAG, changes.note)]))
    db.commit()
    return {"run": run_json(run, _tags_of(db, run))}


@router.get(f"{API}/runs/get", response_model=None)
def get_run(_: Caller, request: Request, db: SessionDep) -> dict[str, Any]:
    run = _run(db, request.query_params.get("run_id") or _query(request, "run_uuid"))
    return {"run": run_json(run, _tags_of(db, run))}


def _log(db: Session, caller: Identity, batch: LogBatch) -> dict[str, Any]:
    """Params, tags and/or metrics into a run of the caller's, in one write transaction."""
    with write(db):
        _apply(db, _writable(db, batch.id, caller), batch)
    return {}


@router.post(f"{API}/runs/log-batch", response_model=None)
def log_batch(caller: Caller, body: Body, db: SessionDep) -> dict[str, Any]:
    return _log(db, caller, parse(LogBatch, body))


def fast_log_batch(_: re.Match[str], scope: Scope, headers: Headers, body: bytes,
                   db: Session) -> bytes | Handover:
    """``log_batch`` for the fast path (``app.ingest.fast_path``), one logged step per request
    being TRL's ``report_to="mlflow"``: the body read as ``_body`` reads it, the caller found as
    ``mlflow_identity`` finds it, then ``_log``. Anything refused goes the regular way, which
    answers it in MLflow's shape."""
    batch = LogBatch.model_validate(loads(body or b"{}"))
    caller, _ = identify(scope, header_key(headers.get("authorization")), None)
    if caller is None:
        return Handover.REGULAR
    return json.dumps(_log(db, caller, batch)).encode()


# loads' NotJson (bad, too deep, too long) and pydantic's ValidationError are ValueErrors.
LOG_BATCH_ROUTE = FastRoute(re.compile(f"^/mlflow{API}/runs/log-batch$"), fast_log_batch,
                            refused=(ValueError, MlflowError), check_origin=True)


@router.post(f"{API}/runs/log-metric", response_model=None)
def log_metric(caller: Caller, body: Body, db: SessionDep) -> dict[str, Any]:
    one = parse(LogMetric, body)
    return _log(db, caller, LogBatch(run_id=one.id, metrics=[one]))


@router.post(f"{API}/runs/log-parameter", response_model=None)
def log_parameter(caller: Caller, body: Body, db: SessionDep) -> dict[str, Any]:
    one = parse(LogOne, body)
    return _log(db, caller, LogBatch(run_id=one.id, params=[one]))


@router.post(f"{API}/runs/set-tag", response_model=None)
def set_tag(caller: Caller, body: Body, db: SessionDep) -> dict[str, Any]:
    one = parse(LogOne, body)
    return _log(db, caller, LogBatch(run_id=one.id, tags=[one]))


@router.post(f"{API}/runs/update", response_model=None)
def update_run(caller: Caller, body: Body, db: SessionDep) -> dict[str, Any]:
    """A new name and/or an end: FINISHED and FAILED end it as a process's exit code would,
    KILLED as a cancel; ending an ended run again with its own status changes nothing."""
    change = parse(UpdateRun, body)
    with write(db):
        run = _run(db, change.id, for_update=True)
        status = change.status
        if lifecycle.Status(run.status) in lifecycle.TERMINAL \
                and mapping.DECK_TO_MLFLOW.get(run.status) == status:
            return {"run_info": run_info(run)}
        run = _writable(db, change.id, caller)
        if change.run_name and (name := mapping.run_name(change.run_name)):
            run.name = name
        if status == mapping.KILLED:
            lifecycle.request_cancel(run, "killed by the MLflow client")
            lifecycle.finish(run, 0, None, None)
        elif status in mapping.END_STATUSES:
            code, error = mapping.END_STATUSES[status]
            lifecycle.finish(run, code, error, None)
        elif status and status not in mapping.LIVE_STATUSES:
            raise invalid(f"status {status[:20]!r}: use FINISHED, FAILED, KILLED or RUNNING")
        if lifecycle.Status(run.status) in lifecycle.TERMINAL:
            pipeline.observe(db, run, [])  # ended: the whole history is in, findings settle
    return {"run_info": run_info(run)}


@router.get("/")
def ui_link() -> RedirectResponse:
    """MLflow's client prints "View run at .../mlflow/#/experiments/0/runs/3"; the fragment
    never reaches a server, so the link leads to the runs list (there is no MLflow UI here)."""
    return RedirectResponse("/runs", status_code=303)


@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def not_offered(rest: str) -> None:
    """Artifacts, models, the registry, traces, search: not part of this subset."""
    raise MlflowError(404, "ENDPOINT_NOT_FOUND",
                      f"/{rest[:100]} is not offered: GRPO Deck speaks a subset of MLflow's "
                      "tracking API (experiments, runs, params, tags, metrics)")


def install(app: FastAPI) -> None:
    errors.install(app)
    app.include_router(router)
