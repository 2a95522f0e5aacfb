"""``POST /api/runs``: launch a spec on the workers, or register a run a script trains itself
(the body's ``source`` tells which; the latter is ``app.ingest.external``'s)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, status
from pydantic import Discriminator, Tag

from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.core.errors import BODY_UNION_TAGS
from app.dryruns.api import DEFAULT_PROMPTS, MAX_PROMPTS, as_json
from app.ingest.external import register_and_answer
from app.launch.gate import LaunchRefused
from app.launch.launch import launch, start_dry_run
from app.runs.schemas import LaunchedOut
from grpodeck.contract.spec import RunSpec
from grpodeck.contract.wire import ExternalRunIn, ExternalRunOut

router = APIRouter(prefix="/api/runs", tags=["runs"])
dry_runs = APIRouter(prefix="/api/dry-runs", tags=["dry runs"])


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
        return register_and_answer(body, request, db, identity.user_id)
    try:
        run = launch(db, body, created_by=identity.user_id)
    except LaunchRefused as refused:
        raise refused.validation_error() from None
    return LaunchedOut(id=run.id, status=run.status, url=f"/runs/{run.id}")


@dry_runs.post("", status_code=status.HTTP_202_ACCEPTED)
def create_dry_run(spec: RunSpec, db: SessionDep, identity: CurrentIdentity,
                   prompts: Annotated[int, Query(ge=1, le=MAX_PROMPTS,
                                                 description="prompts to sample groups for")]
                   = DEFAULT_PROMPTS) -> dict[str, Any]:
    """Score ``prompts`` groups of ``num_generations`` sampled completions with every reward,
    on a worker, without training; the spec passes the launch gate first. Poll
    ``GET /api/dry-runs/{id}`` for the result."""
    try:
        dry = start_dry_run(db, spec, prompts, identity.user_id)
    except LaunchRefused as refused:
        raise refused.validation_error() from None
    return as_json(dry)
