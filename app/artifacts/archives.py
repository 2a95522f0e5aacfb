"""Is a stored artifact an archive someone extracting it would regret? Decided by its bytes.

Why by content: the name is the uploader's choice, so a check that ran only for ``*.tar`` let
the same hostile tar through as ``ckpt.tgz`` or ``ckpt.TAR`` (issue 33). Every upload is sniffed:
a tar (plain, or in any compression ``app.core.inflate`` reads: gzip, bzip2, xz, lzma, zstd,
lz4) or a zip is read member by member and refused when a
member points outside its folder, is a link, a device, a FIFO or a sparse file (its real size is
not what it stores: a 10 KB tar can expand to 1 GiB), or when its members add up past the
artifact size cap (a decompression bomb: counted from the headers while streaming, nothing is
extracted). Anything else (weights, JSON, text) is stored as it came.

After the end-of-archive blocks only zeros may follow (issue 55): ``tar --ignore-zeros`` reads
on past them, so a second tar appended there was extracted unchecked; a header tar cannot read
is refused for the same reason (tar skips it and reads on).

Runs in a worker thread (the caller's ``run_in_threadpool``): reading a large tar is disk work.
"""

from __future__ import annotations

import lzma
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from app.core import inflate

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
READ_ERRORS = (tarfile.TarError, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError)
MAX_TAIL = 1024 * 1024  # zeros after the end blocks: a record's padding is 10 KiB at most


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


class _Header(tarfile.TarInfo):
    """A header that tells its archive why reading stopped (``_Tar.stop``)."""

    @classmethod
    def fromtarfile(cls, tar: tarfile.TarFile) -> tarfile.TarInfo:  # type: ignore[override]
        try:
            return super().fromtarfile(tar)
        except tarfile.HeaderError as exc:
            tar.stop = exc  # type: ignore[attr-defined]
            raise


class _Tar(tarfile.TarFile):
    """A tar read as a stream that keeps the header error it stopped at: zeros (the end
    blocks), a header it cannot read, or the end of the data."""

    tarinfo = _Header
    stop: tarfile.HeaderError | None = None


def tar_problem(path: Path, limit: int, *, must_be_tar: bool = False) -> str | None:
    """Why a tar (possibly compressed) is refused; None when it is safe or not a tar at all.

    ``must_be_tar``: the file is a tar by its name or header, so unreadable is refused too; a
    tar that breaks after its first member is refused whatever its name."""
    seen = 0
    try:
        with path.open("rb") as raw, inflate.decompressed(raw) as stream, \
                _Tar.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                seen += 1
                if (problem := _member_problem(member)) is not None:
                    return problem
                limit -= member.size
                if limit < 0:
                    return ("the archive's members add up to more than the artifact limit "
                            "(GRPODECK_ARTIFACT_MAX_BYTES)")
            return _end_problem(tar)  # type: ignore[arg-type]
    except inflate.Unchecked as exc:
        return f"a compressed file that cannot be checked: {exc}"
    except READ_ERRORS as exc:
        if must_be_tar or seen:
            return f"not a readable tar archive ({exc})"
    return None


def _end_problem(tar: _Tar) -> str | None:
    """Why what follows the last member is refused: anything but zeros after the end blocks,
    or a header tar cannot read (both read on by ``tar --ignore-zeros`` or skipped to)."""
    if isinstance(tar.stop, tarfile.InvalidHeaderError):
        return (f"an unreadable tar header at byte {tar.offset}: tar skips it and reads on, "
                "so the archive is refused")
    if isinstance(tar.stop, tarfile.EOFHeaderError):
        return _tail_problem(tar.fileobj)  # type: ignore[arg-type]
    return None  # the data just ended


def _tail_problem(stream: BinaryIO) -> str | None:
    """Why the bytes after the first end block are refused: any that is not zero, or more
    zeros than any record's padding (reading on would inflate a zero bomb)."""
    read = 0
    while chunk := stream.read(64 * 1024):
        read += len(chunk)
        if chunk.count(0) != len(chunk):
            return ("data after the end of the archive (its zero blocks): tar --ignore-zeros "
                    "would extract a second archive appended there, so it is refused")
        if read > MAX_TAIL:
            return f"more than {MAX_TAIL} bytes of zeros after the end of the archive"
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


def _compressed(path: Path) -> bool:
    """Whether the file starts as a compression ``inflate`` recognises (or cannot check)."""
    with path.open("rb") as raw:
        try:
            return inflate.compression(raw)[0] is not None
        except inflate.Unchecked:
            return True


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
    compressed = _compressed(path)
    if named_tar or compressed or _looks_like_tar(head):
        return tar_problem(path, limit, must_be_tar=named_tar or _looks_like_tar(head))
    return None
