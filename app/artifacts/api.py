"""Artifact endpoints: upload with the run token; list, download and delete with the run's rules.

``upload_router`` takes the run's own token (the worker after its child saved, or
``run.log_artifact`` in an outside script) and is exempt from login like the other report
endpoints: a token opens its own run only, a wrong or ended one is 401. ``router`` is behind
login like every run endpoint: anyone who may see the run may list and download its artifacts;
deleting one is its owner's or an admin's (403 otherwise).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from fastapi.responses import FileResponse
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from app.artifacts import archives, quotas, service, storage
from app.auth.identity import CurrentIdentity, require_manage
from app.core.config import get_settings
from app.core.db import SessionDep
from app.ingest.report_api import RunAuth
from app.runs.lookup import run_or_404
from app.runs.service import get_run, seen
from grpodeck.contract.artifacts import TAR_SUFFIX, ArtifactKind, ArtifactOut, name_problem
from grpodeck.contract.limits import MAX_STEP

upload_router = APIRouter(prefix="/api/runs", tags=["report"])
router = APIRouter(prefix="/api/runs", tags=["artifacts"])


def _registered(db: SessionDep, run_id: int, kind: str, name: str, step: int | None,
                received: storage.Received) -> ArtifactOut:
    run = get_run(db, run_id)
    if run is None:  # deleted while the body streamed in
        storage.remove(received.relpath)
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
    room = quotas.room(db, run, name)  # again: another upload may have taken it meanwhile
    if received.size > room.bytes:
        db.rollback()
        storage.remove(received.relpath)
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, room.message())
    try:
        row, stale = service.register(db, run_id=run_id, kind=kind, name=name, step=step,
                                      received=received)
        seen(run, every_s=0)  # a long upload is the worker's sign of life too
        db.commit()
    except IntegrityError:  # the same name uploaded twice at once: the other one won
        db.rollback()
        storage.remove(received.relpath)
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"{name} is being uploaded by another request: retry") from None
    for relpath in stale:
        storage.remove(relpath)
    return service.out(row)


@upload_router.post("/{run_id}/artifacts", status_code=status.HTTP_201_CREATED,
                    response_model=ArtifactOut,
                    responses={413: {"description": "larger than GRPODECK_ARTIFACT_MAX_BYTES, "
                                     "or past the run's or its owner's artifact quota"},
                               422: {"description": "a bad name, or an archive (tar, compressed "
                                     "tar, zip: by its content) that is not safe to extract "
                                     "(absolute or .. members, links, devices, FIFOs, sparse "
                                     "files, members past the size cap)"}})
async def upload(request: Request, run: RunAuth, db: SessionDep,
                 name: Annotated[str, Query(description="the download's file name; a folder "
                                            "is sent as a tar named NAME.tar")],
                 kind: Annotated[ArtifactKind, Query()] = "file",
                 step: Annotated[int | None, Query(ge=0, lt=MAX_STEP)] = None) -> ArtifactOut:
    """Store the raw request body as one of the run's artifacts (streamed to disk, hashed as it
    arrives). The same name again replaces the earlier file."""
    if (problem := name_problem(name)) is not None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, problem)
    run_id = run.id
    room = await run_in_threadpool(quotas.room, db, run, name)
    await run_in_threadpool(db.rollback)  # no transaction held open while gigabytes arrive
    if room.bytes <= 0:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, room.message())
    try:
        received = await storage.receive(request.stream(), run_id, room.bytes)
    except storage.TooLarge:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, room.message()) from None
    # By content, whatever the name: a hostile tar called ckpt.tgz is checked too.
    problem = await run_in_threadpool(
        archives.archive_problem, storage.absolute(received.relpath),
        get_settings().artifact_max_bytes, named_tar=name.lower().endswith(TAR_SUFFIX))
    if problem is not None:
        storage.remove(received.relpath)
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, problem)
    return await run_in_threadpool(_registered, db, run_id, kind, name, step, received)


@router.get("/{run_id}/artifacts", response_model=list[ArtifactOut])
def list_artifacts(run_id: int, db: SessionDep) -> list[ArtifactOut]:
    """The run's checkpoints, final model, trainer state and files, with size, step and sha256."""
    run_or_404(db, run_id)
    return [service.out(row) for row in service.list_for(db, run_id)]


@router.get("/{run_id}/artifacts/{artifact_id}/file", response_class=FileResponse,
            responses={404: {"description": "no such run or artifact, or its file is gone"}})
def download(run_id: int, artifact_id: int, db: SessionDep) -> FileResponse:
    """The stored bytes, streamed from disk (a folder artifact is its tar)."""
    run_or_404(db, run_id)
    row = service.get(db, run_id, artifact_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"run {run_id} has no artifact {artifact_id}")
    try:
        path = storage.absolute(row.path)
    except FileNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"the file of artifact {artifact_id} is missing on the server")
    media = "application/x-tar" if row.name.endswith(TAR_SUFFIX) else "application/octet-stream"
    # identity: the gzip middleware leaves it alone (weights do not compress, and a download
    # keeps its Content-Length)
    return FileResponse(path, media_type=media, filename=row.name,
                        headers={"Content-Encoding": "identity", "X-Artifact-Sha256": row.sha256})


@router.delete("/{run_id}/artifacts/{artifact_id}", status_code=status.HTTP_204_NO_CONTENT,
               response_class=Response,
               responses={403: {"description": "only the run's creator or an admin may delete"}})
def delete_artifact(run_id: int, artifact_id: int, db: SessionDep,
                    identity: CurrentIdentity) -> Response:
    run = run_or_404(db, run_id)
    require_manage(identity, run)
    row = service.get(db, run_id, artifact_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"run {run_id} has no artifact {artifact_id}")
    relpath = service.delete(db, row)
    db.commit()
    storage.remove(relpath)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
