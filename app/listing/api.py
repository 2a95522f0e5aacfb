"""``GET /api/runs``: the runs list for scripts, with the page's filters, sort and pages."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response, status

from app.core.db import SessionDep
from app.listing import service as listing
from app.runs.schemas import RunOut

router = APIRouter(prefix="/api/runs", tags=["runs"])


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
