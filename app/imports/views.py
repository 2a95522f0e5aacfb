"""Upload a training log made elsewhere and see it as an imported run."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.core.templating import templates
from app.importers import LogFormatError
from app.importers.mapping import MAX_MAPPING, parse_map
from app.imports.service import import_path
from grpodeck.contract.fields import cleaned

router = APIRouter(include_in_schema=False)
# The whole upload is bounded by GRPODECK_UPLOAD_MAX_BODY_BYTES (app.core.limits) before it is
# read; the run's name is what a run record holds.
MAX_NAME = 120
COMPLETIONS_NAME = re.compile(r"completions_\d{1,10}\.parquet")
SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")


def _safe_name(filename: str, index: int) -> str:
    """TRL's ``completions_<step>.parquet`` name (the step may only be in the name); anything
    else (``..``, NUL, 300 characters) gets a neutral name of its own."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return base if COMPLETIONS_NAME.fullmatch(base) else f"upload_{index}.parquet"


async def _save_completions(folder: Path, files: list[UploadFile]) -> Path | None:
    """Keep the uploaded parquet files, each under a name that is safe to write."""
    files = [f for f in files if f.filename]
    if not files:
        return None
    folder.mkdir()
    for i, f in enumerate(files):
        (folder / _safe_name(f.filename or "", i)).write_bytes(await f.read())
    return folder


@router.get("/runs/import", response_class=HTMLResponse)
def import_form(request: Request) -> Response:
    return templates.TemplateResponse(request, "runs/import.html", _form())


def _form(error: str | None = None, name: str = "", mapping: str = "",
          map_error: str | None = None) -> dict[str, object]:
    return {"error": error, "name": name, "mapping": mapping, "map_error": map_error}


@router.post("/runs/import", response_class=HTMLResponse)
async def import_upload(request: Request, db: SessionDep, identity: CurrentIdentity,
                        log: Annotated[UploadFile, File()],
                        name: Annotated[str, Form()] = "",
                        completions: Annotated[list[UploadFile] | None, File()] = None,
                        key_map: Annotated[str, Form(alias="map")] = "",
                        save_map: Annotated[bool, Form()] = False,
                        ) -> Response:
    try:
        mapping = parse_map(cleaned(key_map))
    except ValueError as exc:
        return templates.TemplateResponse(request, "runs/import.html", _form(
            None, cleaned(name)[:MAX_NAME], cleaned(key_map)[:MAX_MAPPING],
            f"Key mapping: {exc}"), status_code=422)
    data = await log.read()
    source = cleaned(log.filename or "log")[:MAX_NAME]
    name = cleaned(name.strip())[:MAX_NAME]  # blank: named after the file (imports.default_name)
    suffix = Path(source).suffix if SUFFIX.fullmatch(Path(source).suffix) else ".log"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"upload{suffix}"
        path.write_bytes(data)
        folder = await _save_completions(Path(tmp) / "rollouts", completions or [])
        try:  # parsing and storing: off the event loop, every other request waits on it
            runs = await run_in_threadpool(import_path, db, path, name or None,
                                           source_name=source, completions=folder,
                                           mapping=mapping, save_mapping=save_map,
                                           created_by=identity.user_id)
        except LogFormatError as exc:
            error = exc.reason
        else:  # committed: the import writes in short transactions of its own
            target = f"/runs/{runs[0].id}" if len(runs) == 1 else "/runs"
            return RedirectResponse(target, status_code=303)
    return templates.TemplateResponse(request, "runs/import.html",
                                      _form(error, name, cleaned(key_map)), status_code=422)
