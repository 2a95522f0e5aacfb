"""``POST /api/imports``: a training node uploads a log over HTTP (API key), so importing needs
no database credentials or migrations there (``grpodeck import --url``, ``grpodeck-client
import``). One file (a log or a trackio project) or a tar.gz of a run folder (TRL output dir with
its checkpoints and completions); the same readers as ``grpodeck import`` and the upload form."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile, status
from pydantic import BaseModel

from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.importers import LogFormatError
from app.metrics.names import parse_mapping
from app.runs.import_views import MAX_MAPPING, MAX_NAME, SUFFIX
from app.runs.imports import import_path
from grpodeck.contract.fields import cleaned

router = APIRouter(prefix="/api/imports", tags=["imports"])
# A folder archive unpacks to at most this much per byte uploaded (logs compress ~10x; the
# upload itself is bounded by GRPODECK_UPLOAD_MAX_BODY_BYTES before it is read).
MAX_UNPACK_RATIO = 50


class ImportedRun(BaseModel):
    id: int
    name: str
    verdict: str | None
    url: str


class ImportedOut(BaseModel):
    runs: list[ImportedRun]


def _unpack(data: bytes, into: Path) -> Path:
    """The run folder inside a tar.gz: its single top-level folder, else the archive's root.
    Only regular files and folders, nothing outside ``into`` (tarfile's ``data`` filter)."""
    archive = into / "upload.tar.gz"
    archive.write_bytes(data)
    root = into / "unpacked"
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            if sum(m.size for m in members) > MAX_UNPACK_RATIO * max(len(data), 1024):
                raise LogFormatError("archive", "unpacks to more than 50x its size")
            tar.extractall(root, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise LogFormatError("archive", f"not a readable tar.gz ({exc})") from None
    entries = list(root.iterdir()) if root.is_dir() else []
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def _mapping(items: list[str]) -> dict[str, str]:
    text = " ".join(items)
    if len(text) > MAX_MAPPING:
        raise HTTPException(422, f"map: longer than {MAX_MAPPING} characters")
    try:
        return parse_mapping(cleaned(text))
    except ValueError as exc:
        raise HTTPException(422, f"map: {exc}") from None


async def _store(tmp: Path, log: UploadFile | None, archive: UploadFile | None) -> tuple[Path, str]:
    """The uploaded log (kept under a safe name with its suffix) or the unpacked folder, and
    the name the user gave it."""
    upload = log or archive
    assert upload is not None
    source = cleaned(upload.filename or "log")[:MAX_NAME]
    data = await upload.read()
    if archive is not None:
        return _unpack(data, tmp), source.removesuffix(".tar.gz").removesuffix(".tgz")
    suffix = Path(source).suffix if SUFFIX.fullmatch(Path(source).suffix) else ".log"
    path = tmp / f"upload{suffix}"
    path.write_bytes(data)
    return path, source


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ImportedOut,
             responses={422: {"description": "no log, both fields, or a log no reader knows"}})
async def create_import(request: Request, db: SessionDep, identity: CurrentIdentity,
                        log: Annotated[UploadFile | None, File(
                            description="a log file (trainer_state.json, JSON/JSONL rows, "
                            "console log, trackio .db)")] = None,
                        archive: Annotated[UploadFile | None, File(
                            description="a run folder as tar.gz")] = None,
                        name: Annotated[str, Form(max_length=MAX_NAME)] = "",
                        key_map: Annotated[list[str], Form(alias="map")] = [],  # noqa: B006
                        ) -> ImportedOut:
    """Store an uploaded training log as imported runs (one, or one per trackio run)."""
    if (log is None) == (archive is None):
        raise HTTPException(422, "send exactly one of `log` (a file) or `archive` (a tar.gz "
                                 "of a run folder)")
    mapping = _mapping(key_map)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path, source = await _store(Path(tmp), log, archive)
            unnamed_archive = archive is not None and path.name == "unpacked"
            given = cleaned(name.strip()) or (source if unnamed_archive else None)
            runs = import_path(db, path, given,
                               source_name=source if log is not None else None, mapping=mapping)
        except LogFormatError as exc:
            raise HTTPException(422, exc.reason) from None
        except OSError as exc:
            raise HTTPException(422, f"could not read the upload ({exc})") from None
    for run in runs:
        run.created_by_id = identity.user_id
    db.commit()
    base = str(request.base_url).rstrip("/")
    return ImportedOut(runs=[ImportedRun(id=r.id, name=r.name, verdict=r.verdict,
                                         url=f"{base}/runs/{r.id}") for r in runs])
