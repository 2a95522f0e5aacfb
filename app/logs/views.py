"""The run page's Logs tab: the training child's output, tailed while the run is live (htmx
polls the tail), and downloadable whole as text."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates
from app.logs import service
from app.runs import lifecycle
from app.runs.lookup import run_or_404
from app.runs.models import Run

router = APIRouter(include_in_schema=False)


def _context(db: SessionDep, run: Run) -> dict[str, object]:
    text, cut = service.tail(db, run.id)
    return {"run": run, "text": text, "cut": cut, "live": lifecycle.is_live(run),
            "refresh": get_settings().live_refresh_seconds}


@router.get("/runs/{run_id}/logs", response_class=HTMLResponse)
def logs_page(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/logs.html", _context(db, run))


@router.get("/runs/{run_id}/_logs", response_class=HTMLResponse)
def logs_tail(run_id: int, request: Request, db: SessionDep) -> Response:
    """The tail, polled while the run is live; the page stops polling once it ended."""
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "runs/_log_tail.html", _context(db, run))


@router.get("/runs/{run_id}/logs.txt")
def logs_download(run_id: int, db: SessionDep) -> Response:
    """The whole log as a text file (read while the request's session is open; a run's log is
    bounded by service.MAX_STORED_CHARS)."""
    run = run_or_404(db, run_id)
    headers = {"Content-Disposition": f'attachment; filename="run-{run.id}-log.txt"'}
    return Response("".join(service.everything(db, run.id)),
                    media_type="text/plain; charset=utf-8", headers=headers)
