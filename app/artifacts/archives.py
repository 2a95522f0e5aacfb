"""Is a stored artifact an archive someone extracting it would regret? Decided by its bytes.

Why by content: the name is the uploader's choice, so a check that ran only for ``*.tar`` let
the same hostile tar through as ``ckpt.tgz`` or ``ckpt.TAR`` (issue 33). Every upload is sniffed:
a tar (plain, or gzip/bzip2/xz compressed) or a zip is read member by member and refused when a
member points outside its folder, is a link, a device, a FIFO or a sparse file (its real size is
not what it stores: a 10 KB tar can expand to 1 GiB), or when its members add up past the
artifact size cap (a decompression bomb: counted from the headers while streaming, nothing is
extracted). Anything else (weights, JSON, text) is stored as it came.

Runs in a worker thread (the caller's ``run_in_threadpool``): reading a large tar is disk work.
"""

from __future__ import annotations

import lzma
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


def _path_problem(name: str) -> str | None:
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or ".." in parts or "\\" in name or (
            len(name) > 1 and name[1] == ":"):
        return f"archive member {name[:200]!r} points outside its folder"
    return None


def _member_problem(member: tarfile.TarInfo) -> str | None:
    if (problem := _path_problem(member.name)) is not None:
        return problem
    if member.issparse():
        return (f"tar member {member.name[:200]!r} is a sparse file: its real size is not "
                "what the archive stores, so it is refused")
    if not (member.isfile() or member.isdir()):
        return (f"tar member {member.name[:200]!r} is a link or special file (device, "
                "FIFO): only files and folders are accepted")
    return None


def tar_problem(path: Path, limit: int, *, must_be_tar: bool = False) -> str | None:
    """Why a tar (possibly compressed) is refused; None when it is safe or not a tar at all.

    ``must_be_tar``: the file is a tar by its name or header, so unreadable is refused too; a
    tar that breaks after its first member is refused whatever its name."""
    seen = 0
    try:
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                seen += 1
                if (problem := _member_problem(member)) is not None:
                    return problem
                limit -= member.size
                if limit < 0:
                    return ("the archive's members add up to more than the artifact limit "
                            "(GRPODECK_ARTIFACT_MAX_BYTES)")
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
        if must_be_tar or seen:
            return f"not a readable tar archive ({exc})"
    return None


def zip_problem(path: Path, limit: int) -> str | None:
    """Why a zip is refused: a member outside its folder, a symlink, or a bomb."""
    try:
        with zipfile.ZipFile(path) as archive:
            total = 0
            for info in archive.infolist():
                if (problem := _path_problem(info.filename)) is not None:
                    return problem
                mode = info.external_attr >> 16
                if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    return (f"zip member {info.filename[:200]!r} is a link or special file: "
                            "only files and folders are accepted")
                total += info.file_size
                if total > limit:
                    return (f"the archive's members add up to more than {limit} bytes, the "
                            "artifact limit (GRPODECK_ARTIFACT_MAX_BYTES)")
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return f"not a readable zip archive ({exc})"
    return None


def _looks_like_tar(head: bytes) -> bool:
    """A POSIX/GNU tar header (``ustar`` magic), or an old v7 one (its checksum adds up)."""
    return len(head) >= 512 and (head[257:262] == b"ustar"
                                 or _header_checksum(head) in tarfile.calc_chksums(head))


def _header_checksum(head: bytes) -> int:
    try:
        return int(head[148:156].split(b"\0", 1)[0].strip() or b"-1", 8)
    except ValueError:
        return -1


def archive_problem(path: Path, limit: int, *, named_tar: bool = False) -> str | None:
    """Why the stored file at ``path`` is refused, judged by its first bytes; None to keep it.

    ``named_tar``: the uploader called it ``*.tar`` (a folder artifact), so it must be one."""
    with path.open("rb") as f:
        head = f.read(512)
    if head.startswith(ZIP_MAGIC):
        return zip_problem(path, limit)
    if named_tar or head.startswith(COMPRESSED_MAGIC) or _looks_like_tar(head):
        return tar_problem(path, limit, must_be_tar=named_tar or _looks_like_tar(head))
    return None
