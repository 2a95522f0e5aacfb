"""Upload a training log made elsewhere (a file, an archive of a run folder, or the folder
itself) and see it as an imported run."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.core.templating import templates
from app.importers import LogFormatError
from app.importers.mapping import MAX_MAPPING, parse_map
from app.imports.archives import (
    MAX_MEMBERS,
    UNPACKED,
    archive_stem,
    is_archive,
    save_folder,
    unpack,
)
from app.imports.service import import_path
from app.runs.models import Run
from grpodeck.contract.fields import cleaned

router = APIRouter(include_in_schema=False)
# The whole upload is bounded by GRPODECK_UPLOAD_MAX_BODY_BYTES (app.core.limits) before it is
# read; the run's name is what a run record holds.
MAX_NAME = 120
COMPLETIONS_NAME = re.compile(r"completions_\d{1,10}\.parquet")
SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")
MAX_COMPLETION_FILES = 10_000  # completions_<step>.parquet: one per logged step
NOTHING_CHOSEN = ("Choose a log file (or an archive of a run folder) or a run folder: one of "
                  "them")


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


@dataclass(frozen=True)
class Received:
    """What the form sent, read: one file (a log or an archive of a run folder) or the files
    of a folder (``webkitdirectory``: each named by its path inside the folder)."""

    filename: str
    data: bytes = b""
    folder: list[tuple[str, bytes]] = field(default_factory=list)


async def _received(log: UploadFile | None, folder: list[UploadFile] | None) -> Received | None:
    """The upload, or None unless exactly one of a file and a folder was chosen (a browser
    sends an empty part for a field left empty)."""
    files = [f for f in folder or [] if f.filename]
    if (log is None or not log.filename) == (not files):
        return None
    if files:
        return Received("folder", folder=[(f.filename or "", await f.read()) for f in files])
    assert log is not None
    return Received(cleaned(log.filename or "log")[:MAX_NAME], await log.read())


def _place(tmp: Path, upload: Received) -> tuple[Path, str | None, str]:
    """(the path to import, the file's own name: None for a folder, the name a mapping is
    remembered under): a folder or an archive is unpacked as the API's ``archive`` is."""
    if upload.folder:
        path = save_folder(upload.folder, tmp)
        return path, None, path.name if path.name != UNPACKED else upload.filename
    if is_archive(upload.data):
        return unpack(upload.data, tmp), None, archive_stem(upload.filename)
    suffix = Path(upload.filename).suffix
    path = tmp / f"upload{suffix if SUFFIX.fullmatch(suffix) else '.log'}"
    path.write_bytes(upload.data)
    return path, upload.filename, upload.filename


def _import(db: Session, tmp: Path, upload: Received, name: str, completions: Path | None,
            mapping: dict[str, str], save_map: bool, user_id: int | None) -> list[Run]:
    """Place the upload and import it (a folder of several top-level entries is named after
    the upload, as the API names such an archive)."""
    path, source_name, source = _place(tmp, upload)
    given = name or (source if path.name == UNPACKED else None)
    return import_path(db, path, given or None, source_name=source_name, completions=completions,
                       mapping=mapping, save_mapping=save_map, mapping_source=source,
                       created_by=user_id, upload_root=tmp / UNPACKED)


# A folder arrives file by file: as many as an archive may hold, and TRL's completions files
# beside them (Starlette's form parser stops at 1,000 files by default).
@router.post("/runs/import", response_class=HTMLResponse,
             form_limits={"max_files": MAX_MEMBERS + MAX_COMPLETION_FILES})
async def import_upload(request: Request, db: SessionDep, identity: CurrentIdentity,
                        log: Annotated[UploadFile | None, File()] = None,
                        folder: Annotated[list[UploadFile] | None, File()] = None,
                        name: Annotated[str, Form()] = "",
                        completions: Annotated[list[UploadFile] | None, File()] = None,
                        key_map: Annotated[str, Form(alias="map")] = "",
                        save_map: Annotated[bool, Form()] = False,
                        ) -> Response:
    """A log file, an archive of a run folder, or a folder (issue 56), imported as
    ``POST /api/imports`` does; the form again with the reason when it cannot be."""
    name = cleaned(name.strip())[:MAX_NAME]  # blank: named after the file (imports.naming)
    try:
        mapping = parse_map(cleaned(key_map))
    except ValueError as exc:
        return templates.TemplateResponse(request, "runs/import.html", _form(
            None, name, cleaned(key_map)[:MAX_MAPPING], f"Key mapping: {exc}"),
            status_code=422)
    upload = await _received(log, folder)
    if upload is None:
        return templates.TemplateResponse(request, "runs/import.html", _form(
            NOTHING_CHOSEN, name, cleaned(key_map)), status_code=422)
    with tempfile.TemporaryDirectory() as tmp:
        rollouts = await _save_completions(Path(tmp) / "rollouts", completions or [])
        try:  # unpacking, parsing and storing: off the event loop, every request waits on it
            runs = await run_in_threadpool(_import, db, Path(tmp), upload, name, rollouts,
                                           mapping, save_map, identity.user_id)
        except LogFormatError as exc:
            error, code = exc.reason, 422
        except HTTPException as exc:  # an archive that unpacks past its cap: 413
            error, code = str(exc.detail), exc.status_code
        else:  # committed: the import writes in short transactions of its own
            target = f"/runs/{runs[0].id}" if len(runs) == 1 else "/runs"
            return RedirectResponse(target, status_code=303)
    return templates.TemplateResponse(request, "runs/import.html",
                                      _form(error, name, cleaned(key_map)), status_code=code)
