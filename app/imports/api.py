"""``POST /api/imports``: a training node uploads a log over HTTP (API key), so importing needs
no database credentials or migrations there (``grpodeck import --url``, ``grpodeck-client
import``). One file (a log or a trackio project) or a tar.gz of a run folder (TRL output dir with
its checkpoints and completions); the same readers as ``grpodeck import`` and the upload form."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile, status
from pydantic import BaseModel
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.auth.identity import CurrentIdentity
from app.core.db import SessionDep
from app.diagnostics.coverage import UNKNOWN
from app.importers import LogFormatError
from app.importers.base import LogTooDeepError
from app.importers.mapping import parse_map
from app.importers.read_report import suggested_map
from app.imports import saved_mappings
from app.imports.archives import UNPACKED, archive_stem, unpack
from app.imports.service import import_path
from app.imports.views import MAX_NAME, SUFFIX
from app.runs.models import Run
from grpodeck.contract.fields import cleaned

router = APIRouter(prefix="/api/imports", tags=["imports"])


class ImportedRun(BaseModel):
    id: int
    name: str
    verdict: str | None
    url: str
    # when the verdict is unknown (no reward read): the map to try, e.g. "--map Score=reward"
    suggested_map: str | None = None


class ImportedOut(BaseModel):
    runs: list[ImportedRun]


class SavedMappingOut(BaseModel):
    """One remembered mapping: the file (or folder) name it is read for, and whose it is
    (a user id; 0: saved without an account)."""

    source: str
    mapping: str
    owner: int


def _mapping(items: list[str]) -> dict[str, str]:
    """A repeated ``map`` field is one item per pair (``--map A=a --map B=b``), never joined."""
    try:
        return parse_map([cleaned(item) for item in items])
    except ValueError as exc:
        raise HTTPException(422, f"map: {exc}") from None


def _store(tmp: Path, upload: UploadFile, data: bytes, archive: bool) -> tuple[Path, str]:
    """The uploaded log (kept under a safe name with its suffix) or the unpacked folder, and
    the name the user gave it."""
    source = cleaned(upload.filename or "log")[:MAX_NAME]
    if archive:
        return unpack(data, tmp), archive_stem(source)
    suffix = Path(source).suffix if SUFFIX.fullmatch(Path(source).suffix) else ".log"
    path = tmp / f"upload{suffix}"
    path.write_bytes(data)
    return path, source


def _import(db: Session, upload: UploadFile, data: bytes, archive: bool, name: str,
            mapping: dict[str, str], save_map: bool, user_id: int | None) -> list[Run]:
    """Unpack or keep the upload, read it and store its runs, off the event loop; the import
    commits as it goes, in short transactions (``imports.service.store_run``)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path, source = _store(Path(tmp), upload, data, archive)
            unnamed_archive = archive and path.name == UNPACKED
            given = cleaned(name.strip()) or (source if unnamed_archive else None)
            runs = import_path(db, path, given, source_name=None if archive else source,
                               mapping=mapping, save_mapping=save_map, mapping_source=source,
                               created_by=user_id, upload_root=Path(tmp) / UNPACKED)
        except LogTooDeepError as exc:
            raise HTTPException(400, exc.reason) from None
        except LogFormatError as exc:
            raise HTTPException(422, exc.reason) from None
        except OSError as exc:
            raise HTTPException(422, f"could not read the upload ({exc})") from None
    return runs


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ImportedOut,
             responses={422: {"description": "no log, both fields, or a log no reader knows"},
                        400: {"description": "a JSON document nested too deep to be a log"},
                        413: {"description": "an archive that unpacks past its cap"}})
async def create_import(request: Request, db: SessionDep, identity: CurrentIdentity,
                        log: Annotated[UploadFile | None, File(
                            description="a log file (trainer_state.json, JSON/JSONL rows, "
                            "console log, trackio .db, MLflow mlflow.db)")] = None,
                        archive: Annotated[UploadFile | None, File(
                            description="a run folder as tar, tar.gz or zip")] = None,
                        name: Annotated[str, Form(max_length=MAX_NAME)] = "",
                        key_map: Annotated[list[str], Form(alias="map")] = [],  # noqa: B006
                        save_map: Annotated[bool, Form(description=(
                            "remember `map` for the next log of this file (or folder) name; "
                            "a log sent without `map` is read with the one remembered"))] = False,
                        ) -> ImportedOut:
    """Store an uploaded training log as imported runs (one, or one per trackio run)."""
    if (log is None) == (archive is None):
        raise HTTPException(422, "send exactly one of `log` (a file) or `archive` (a tar.gz "
                                 "of a run folder)")
    mapping = _mapping(key_map)
    upload = log or archive
    assert upload is not None
    data = await upload.read()
    # Unpacking, parsing and storing are CPU and disk work: in a worker thread, so that one
    # large or hostile upload never stalls the event loop every other request waits on.
    runs = await run_in_threadpool(_import, db, upload, data, archive is not None, name,
                                   mapping, save_map, identity.user_id)
    base = str(request.base_url).rstrip("/")
    return ImportedOut(runs=[ImportedRun(
        id=r.id, name=r.name, verdict=r.verdict, url=f"{base}/runs/{r.id}",
        suggested_map=suggested_map(set(r.metric_names or [])) if r.verdict == UNKNOWN else None)
        for r in runs])


@router.get("/mappings", response_model=list[SavedMappingOut])
def list_mappings(db: SessionDep, identity: CurrentIdentity) -> list[SavedMappingOut]:
    """The caller's remembered mappings (``save_map``); an admin's call lists everyone's."""
    rows = saved_mappings.listing(db, identity.user_id, everyone=identity.may_administer)
    return [SavedMappingOut(source=r.source, mapping=r.mapping, owner=r.owner) for r in rows]
