"""Upload a training log made elsewhere and see it as an imported run."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.core.templating import templates
from app.importers import LogFormatError
from app.runs.imports import import_log

router = APIRouter(include_in_schema=False)
MAX_UPLOAD_BYTES = 200 * 1024 * 1024


async def _save_completions(folder: Path, files: list[UploadFile]) -> Path | None:
    """Keep the uploaded parquet files under their own names (the step is in the name)."""
    files = [f for f in files if f.filename]
    if not files:
        return None
    folder.mkdir()
    for f in files:
        (folder / Path(f.filename or "completions.parquet").name).write_bytes(await f.read())
    return folder


@router.get("/runs/import", response_class=HTMLResponse)
def import_form(request: Request) -> Response:
    return templates.TemplateResponse(request, "runs/import.html", {"error": None, "name": ""})


@router.post("/runs/import", response_class=HTMLResponse)
async def import_upload(request: Request, db: SessionDep, identity: CurrentIdentity,
                        log: Annotated[UploadFile, File()],
                        name: Annotated[str, Form()] = "",
                        completions: Annotated[list[UploadFile] | None, File()] = None,
                        ) -> Response:
    data = await log.read(MAX_UPLOAD_BYTES + 1)
    error = "the file is larger than 200 MB" if len(data) > MAX_UPLOAD_BYTES else None
    if error is None:
        suffix = Path(log.filename or "log").suffix
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"upload{suffix}"
            path.write_bytes(data)
            folder = await _save_completions(Path(tmp) / "rollouts", completions or [])
            try:
                run = import_log(db, path, name.strip() or log.filename or "imported log",
                                 source_name=log.filename, completions=folder)
            except LogFormatError as exc:
                error = exc.reason
            else:
                run.created_by_id = identity.user_id
                db.commit()
                return RedirectResponse(f"/runs/{run.id}", status_code=303)
    return templates.TemplateResponse(request, "runs/import.html",
                                      {"error": error, "name": name}, status_code=422)
