"""One run as JSON for scripts and other tools (OpenAPI at /docs): read it, cancel it, delete
it; the run page's buttons do the same."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from app.auth.identity import CurrentIdentity, require_manage
from app.core.db import SessionDep
from app.run_page import removal
from app.runs import lifecycle
from app.runs.lookup import run_or_404
from app.runs.schemas import RunOut

router = APIRouter(prefix="/api/runs", tags=["runs"])


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


@router.delete("/{run_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response,
               responses={403: {"description": "only the run's creator or an admin may delete"},
                          409: {"description": "the run is still queued or running"}})
def remove(run_id: int, db: SessionDep, identity: CurrentIdentity) -> Response:
    """Delete a finished run with its metrics, findings and rollouts."""
    run = run_or_404(db, run_id)
    require_manage(identity, run)
    if (reason := removal.deletion_refusal(run)) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, reason)
    removal.delete_run(db, run)
    db.commit()
    removal.remove_files(run_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
