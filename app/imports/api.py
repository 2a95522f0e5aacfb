"""``POST /api/imports``: a training node uploads a log over HTTP (API key), so importing needs
no database credentials or migrations there (``grpodeck import --url``, ``grpodeck-client
import``). One file (a log or a trackio project) or a tar.gz of a run folder (TRL output dir with
its checkpoints and completions); the same readers as ``grpodeck import`` and the upload form."""

from __future__ import annotations

import io
import lzma
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile, status
from pydantic import BaseModel
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.auth.identity import CurrentIdentity
from app.core import inflate
from app.core.db import SessionDep
from app.diagnostics.coverage import UNKNOWN
from app.importers import LogFormatError
from app.importers.base import LogTooDeepError
from app.importers.mapping import parse_map
from app.importers.read_report import suggested_map
from app.imports import saved_mappings
from app.imports.service import import_path
from app.imports.views import MAX_NAME, SUFFIX
from app.runs.models import Run
from grpodeck.contract.fields import cleaned

router = APIRouter(prefix="/api/imports", tags=["imports"])
# A folder archive unpacks to at most this much per byte uploaded (logs compress ~10x; the
# upload itself is bounded by GRPODECK_UPLOAD_MAX_BODY_BYTES before it is read).
MAX_UNPACK_RATIO = 50
MAX_MEMBERS = 20_000  # a run folder holds checkpoints, event files, metric files: not millions
ZIP_MAGIC = b"PK\x03\x04"
UNPACKED = "unpacked"  # the folder an archive is unpacked into, inside the upload's temp folder


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


def _unpack(data: bytes, into: Path) -> Path:
    """The run folder inside an archive (tar, tar.gz or zip): its single top-level folder,
    else the archive's root."""
    root = into / UNPACKED
    if data.startswith(ZIP_MAGIC):
        _unzip(data, into / "upload.zip", root)
    else:
        _untar(data, root)
    entries = list(root.iterdir()) if root.is_dir() else []
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def _check_size(sizes: list[int], packed: int) -> None:
    if len(sizes) > MAX_MEMBERS:
        raise LogFormatError("archive", f"holds more than {MAX_MEMBERS} files")
    if sum(sizes) > MAX_UNPACK_RATIO * max(packed, 1024):
        raise LogFormatError("archive", f"unpacks to more than {MAX_UNPACK_RATIO}x its size")


def _untar(data: bytes, root: Path) -> None:
    """Only regular files and folders, nothing outside ``root`` (tarfile's ``data`` filter).

    Streamed: each member is extracted as its header arrives, and the inflated bytes are
    counted as they are read, so a bomb (2 GiB of zeros in a 2 MB upload) is refused after
    ``MAX_UNPACK_RATIO`` times its size is read, never inflated whole (``inflate.Capped``)."""
    limit = MAX_UNPACK_RATIO * max(len(data), 1024)
    try:
        with inflate.open_capped(io.BytesIO(data), limit) as stream, \
                tarfile.open(fileobj=stream, mode="r|") as tar:
            for count, member in enumerate(tar, 1):
                if count > MAX_MEMBERS:
                    raise LogFormatError("archive", f"holds more than {MAX_MEMBERS} files")
                tar.extract(member, root, filter="data")
    except inflate.TooLarge:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE,
                            f"the archive unpacks to more than {limit} bytes "
                            f"({MAX_UNPACK_RATIO}x its size): refused") from None
    except tarfile.FilterError as exc:
        raise LogFormatError("archive", _refused_member(exc)) from None
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        raise LogFormatError("archive", f"not a readable tar.gz or zip ({exc})") from None


def _refused_member(exc: tarfile.FilterError) -> str:
    """Why the ``data`` filter refused a member, naming only the member (tarfile's own message
    names where it would have landed: a path of this server)."""
    name = exc.tarinfo.name[:200]
    if isinstance(exc, (tarfile.AbsoluteLinkError, tarfile.LinkOutsideDestinationError)):
        return f"member {name!r} links outside the archive"
    if isinstance(exc, tarfile.SpecialFileError):
        return f"member {name!r} is not a regular file, folder or link"
    return f"member {name!r} points outside the archive"


def _unzip(data: bytes, archive: Path, root: Path) -> None:
    """Each member's path is checked to stay inside ``root`` (no absolute names, no ``..``);
    links cannot be stored in a zip, so only files and folders come out."""
    archive.write_bytes(data)
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            _check_size([m.file_size for m in members], len(data))
            base = root.resolve()
            for member in members:
                target = (root / member.filename).resolve()
                if not target.is_relative_to(base):
                    raise LogFormatError("archive", f"member {member.filename!r} points "
                                                    "outside the archive")
            zf.extractall(root)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            NotImplementedError, RuntimeError) as exc:
        raise LogFormatError("archive", f"not a readable zip ({exc})") from None


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
        return _unpack(data, tmp), source.removesuffix(".tar.gz").removesuffix(
            ".tgz").removesuffix(".zip").removesuffix(".tar")
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
