"""Artifact endpoints: upload with the run token; list, download and delete with the run's rules.

``upload_router`` takes the run's own token (the worker after its child saved, or
``run.log_artifact`` in an outside script) and is exempt from login like the other report
endpoints: a token opens its own run only, a wrong or ended one is 401. ``router`` is behind
login like every run endpoint: anyone who may see the run may list and download its artifacts;
deleting one is its owner's or an admin's (403 otherwise).
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from fastapi.responses import FileResponse
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from app.artifacts import archives, quotas, service, storage
from app.auth.identity import CurrentIdentity, require_manage
from app.core.config import get_settings
from app.core.db import SessionDep, write
from app.ingest.report_api import RunAuth
from app.runs.lookup import run_or_404
from app.runs.service import get_run_for_update, seen
from grpodeck.contract.artifacts import TAR_SUFFIX, ArtifactKind, ArtifactOut, name_problem
from grpodeck.contract.limits import MAX_STEP

upload_router = APIRouter(prefix="/api/runs", tags=["report"])
router = APIRouter(prefix="/api/runs", tags=["artifacts"])


def _reserve(db: SessionDep, run_id: int, name: str, declared: int | None) -> quotas.Held:
    """Reserve the upload's bytes under the run's lock (``quotas.reserve``), or the 413 that
    says which limit it would pass."""
    db.rollback()  # the token check's read: the lock starts a write transaction of its own
    with write(db):
        run = get_run_for_update(db, run_id)
        if run is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
        try:
            return quotas.reserve(db, run, name, declared)
        except quotas.Full as exc:
            raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, exc.room.message()) from None


def _release(db: SessionDep, reservation_id: int) -> None:
    """The upload failed or was refused: its reserved bytes are free again."""
    db.rollback()
    with write(db):
        quotas.release(db, reservation_id)


def _registered(db: SessionDep, run_id: int, kind: str, name: str, step: int | None,
                received: storage.Received, reservation_id: int) -> ArtifactOut:
    """The row for the stored file, in place of its reservation (the bytes were reserved
    already: nothing to check again), in one transaction under the run's lock."""
    try:
        with write(db):
            run = get_run_for_update(db, run_id)
            if run is None:  # deleted while the body streamed in (its reservation with it)
                raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} not found")
            quotas.release(db, reservation_id)
            row, stale = service.register(db, run_id=run_id, kind=kind, name=name, step=step,
                                          received=received)
            seen(run, every_s=0)  # a long upload is the worker's sign of life too
    except HTTPException:
        storage.remove(received.relpath)
        raise
    except IntegrityError:  # the same name uploaded twice at once: the other one won
        storage.remove(received.relpath)
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"{name} is being uploaded by another request: retry") from None
    for relpath in stale:
        storage.remove(relpath)
    return service.out(row)


def _declared(request: Request) -> int | None:
    """The body's declared length, the bytes to reserve (None: chunked, reserve all room)."""
    length = request.headers.get("content-length", "")
    return int(length) if length.isdigit() else None


async def _stored(request: Request, db: SessionDep, run_id: int, name: str, kind: str,
                  step: int | None, held: quotas.Held) -> ArtifactOut:
    """Stream the body in (at most the bytes reserved), check it by content, register it.
    Refusals raise ``HTTPException`` with the partial or refused file removed."""
    try:
        received = await storage.receive(request.stream(), run_id, held.size)
    except storage.TooLarge:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, held.past) from None
    # By content, whatever the name: a hostile tar called ckpt.tgz is checked too.
    problem = await run_in_threadpool(
        archives.archive_problem, storage.absolute(received.relpath),
        get_settings().artifact_max_bytes, named_tar=name.lower().endswith(TAR_SUFFIX))
    if problem is not None:
        storage.remove(received.relpath)
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, problem)
    return await run_in_threadpool(_registered, db, run_id, kind, name, step, received,
                                   held.id)


@upload_router.post("/{run_id}/artifacts", status_code=status.HTTP_201_CREATED,
                    response_model=ArtifactOut,
                    responses={413: {"description": "larger than GRPODECK_ARTIFACT_MAX_BYTES, "
                                     "or past the run's or its owner's artifact quota (uploads "
                                     "in progress hold their declared length)"},
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
    arrives). The same name again replaces the earlier file. Its bytes are reserved against
    the quotas before it streams in, so uploads at once never pass them together."""
    if (problem := name_problem(name)) is not None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, problem)
    run_id, declared = run.id, _declared(request)
    held = await run_in_threadpool(_reserve, db, run_id, name, declared)
    try:
        return await _stored(request, db, run_id, name, kind, step, held)
    except BaseException:
        with anyio.CancelScope(shield=True):  # a client gone mid-upload releases it too
            await run_in_threadpool(_release, db, held.id)
        raise


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
