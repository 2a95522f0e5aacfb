"""The run page's Artifacts tab: what the run saved (checkpoints, final model, trainer state),
with step, size and a download link. Names are shown escaped (Jinja autoescape): an outside
script chooses them."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.artifacts import service
from app.core.db import SessionDep
from app.core.templating import templates
from app.runs.lookup import run_or_404

router = APIRouter(include_in_schema=False)
UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))


def size_text(n: int) -> str:
    """Bytes as people read them: 1.5 GiB, 312 KiB, 17 bytes."""
    for unit, size in UNITS:
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


@router.get("/runs/{run_id}/artifacts", response_class=HTMLResponse)
def artifacts_page(run_id: int, request: Request, db: SessionDep) -> Response:
    run = run_or_404(db, run_id)
    rows = [{"row": row, "size": size_text(row.size), "url": service.out(row).url}
            for row in service.list_for(db, run_id)]
    return templates.TemplateResponse(request, "artifacts/list.html",
                                      {"run": run, "rows": rows})
