"""Uploaded run folders: an archive (tar, compressed or not, or zip) unpacked with its members
checked, or a folder a browser sent file by file (``<input webkitdirectory>``, each file named
by its path inside the folder), written under the same bounds.

Shared by ``POST /api/imports`` (``archive``) and the import page, which takes a folder or an
archive (issue 56), so both read a folder the same way: no member lands outside it, at most
``MAX_MEMBERS`` files, at most ``MAX_UNPACK_RATIO`` times the upload once inflated.
"""

from __future__ import annotations

import io
import lzma
import tarfile
import zipfile
import zlib
from pathlib import Path

from fastapi import HTTPException, status

from app.core import inflate
from app.importers import LogFormatError

# A folder archive unpacks to at most this much per byte uploaded (logs compress ~10x; the
# upload itself is bounded by GRPODECK_UPLOAD_MAX_BODY_BYTES before it is read).
MAX_UNPACK_RATIO = 50
MAX_MEMBERS = 20_000  # a run folder holds checkpoints, event files, metric files: not millions
ZIP_MAGIC = b"PK\x03\x04"
UNPACKED = "unpacked"  # the folder an archive is unpacked into, inside the upload's temp folder
TAR_MAGIC = b"ustar"  # at offset 257 of a tar's first header
ARCHIVE_COMPRESSIONS = frozenset({"gzip", "bzip2", "xz", "zstd", "lz4", "lz4-legacy"})
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.bz2", ".tar.xz", ".tar.lz4",
                    ".zip", ".tar")
MAX_DEPTH = 32  # folders in a path inside an uploaded folder


def unpack(data: bytes, into: Path) -> Path:
    """The run folder inside an archive (tar, compressed or not, or zip), unpacked into
    ``into/UNPACKED`` (``run_folder``)."""
    root = into / UNPACKED
    if data.startswith(ZIP_MAGIC):
        _unzip(data, into / "upload.zip", root)
    else:
        _untar(data, root)
    return run_folder(root)


def run_folder(root: Path) -> Path:
    """The folder that holds the run: ``root``'s single top-level folder, else ``root``."""
    entries = list(root.iterdir()) if root.is_dir() else []
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def is_archive(data: bytes) -> bool:
    """A zip, a tar, or a compressed file (a tar once inflated, or refused as no archive):
    what the import form unpacks rather than reads as a log. No log format starts so (a
    TensorBoard event file starts with its record's length, a SQLite file with its name)."""
    if data.startswith(ZIP_MAGIC) or data[257:262] == TAR_MAGIC:
        return True
    kind, _ = inflate.compression(io.BytesIO(data[:64 * 1024]))
    return kind in ARCHIVE_COMPRESSIONS


def archive_stem(name: str) -> str:
    """``run.tar.gz`` -> ``run``: the name an archive's folder is known by."""
    lower = name.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return name


def folder_path(name: str) -> tuple[str, ...]:
    """The parts of a file's path inside an uploaded folder (``webkitdirectory`` sends
    ``runs/Dec02_host/events.out...``), or LogFormatError for a path that could land outside
    it or that no folder can hold (absolute, ``..``, empty parts, NUL, too deep or long)."""
    parts = tuple(name.replace("\\", "/").split("/"))
    if (not parts or len(parts) > MAX_DEPTH or any(
            p in ("", ".", "..") or "\x00" in p or len(p.encode()) > 255 for p in parts)):
        raise LogFormatError("folder", f"file {name[:200]!r} is no path inside the folder")
    return parts


def save_folder(files: list[tuple[str, bytes]], into: Path) -> Path:
    """An uploaded folder's files (each its path inside it, its bytes) written under
    ``into/UNPACKED`` with the same bounds as an archive's members; the run's folder."""
    if len(files) > MAX_MEMBERS:
        raise LogFormatError("folder", f"holds more than {MAX_MEMBERS} files")
    root = into / UNPACKED
    try:
        for name, data in files:
            target = root.joinpath(*folder_path(name))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except OSError as exc:  # a file where a folder was (``a`` and ``a/b``), a full disk
        raise LogFormatError("folder", f"could not be stored ({exc.strerror or exc})") from None
    return run_folder(root)




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
