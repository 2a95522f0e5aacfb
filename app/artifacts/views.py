"""The run page's Artifacts tab: what the run saved (checkpoints, final model, trainer state),
with step, size and a download link, and for the run's owner or an admin a Delete button (htmx,
confirmed first: the table comes back without the row). Names are shown escaped (Jinja
autoescape): an outside script chooses them."""

from __future__ import annotations

import html

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.artifacts import service, storage
from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.core.templating import templates, with_toast
from app.runs.lookup import run_or_404
from app.runs.models import Run

router = APIRouter(include_in_schema=False)
UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def size_text(n: int) -> str:
    """Bytes as people read them: 1.5 GiB, 312 KiB, 17 bytes."""
    for unit, size in UNITS:
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _context(db: SessionDep, run: Run) -> dict[str, object]:
    rows = [{"row": row, "size": size_text(row.size), "url": service.out(row).url}
            for row in service.list_for(db, run.id)]
    return {"run": run, "rows": rows}


@router.get("/runs/{run_id}/artifacts", response_class=HTMLResponse)
def artifacts_page(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    return templates.TemplateResponse(request, "artifacts/list.html", _context(db, run))


@router.post("/runs/{run_id}/artifacts/{artifact_id}/delete", response_class=HTMLResponse)
def delete_artifact(run_id: int, artifact_id: int, request: Request, db: SessionDep,
                    identity: CurrentIdentity) -> Response:
    """The Delete button: the run's owner's or an admin's, as ``DELETE /api/runs/{id}/artifacts
    /{artifact}`` is (403 with the reason otherwise); htmx gets the table back without the row,
    a plain form post goes back to the tab. Cross-site posts never get here (app.security)."""
    run = run_or_404(db, run_id)
    if (reason := identity.manage_refusal(run)) is not None:
        return HTMLResponse(f'<div class="alert critical">{html.escape(reason)}</div>',
                            status_code=status.HTTP_403_FORBIDDEN)
    row = service.get(db, run_id, artifact_id)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {run_id} has no artifact {artifact_id}")
    name, relpath = row.name, service.delete(db, row)
    db.commit()
    storage.remove(relpath)  # after the commit: a rolled-back delete keeps its file
    if request.headers.get("hx-request") != "true":
        return RedirectResponse(f"/runs/{run_id}/artifacts", status_code=status.HTTP_303_SEE_OTHER)
    response = templates.TemplateResponse(request, "artifacts/_table.html", _context(db, run))
    return with_toast(response, f"{name} deleted")
