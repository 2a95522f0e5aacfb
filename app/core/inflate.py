"""Decompress an upload with a cap on the inflated bytes, counted while streaming.

Why count while reading: a compressed upload's headers (a tar member's size, gzip's ISIZE)
are the sender's word, and reading a whole member list first (``getmembers``) means inflating
all of it: 2 GiB of zeros arrive as 2 MB of gzip. The reader here stops with ``TooLarge`` as
soon as more than the cap has come out, whatever the headers said; gzip, bzip2, xz, lzma, zstd
and lz4 are recognised by their first bytes, anything else is read as it is (and counted too).

Why zstd and lz4 too (issue 55): a compression the checks do not know is "not an archive" to
them, and stored unchecked, while ``tar`` reads a ``.tar.zst`` as any other tar. ``decompressed``
is the one door every upload check reads an archive through (the artifact checks, the log
import); a compression it recognises but cannot read (lz4's legacy format) is ``Unchecked``,
for the caller to refuse, and a decompressing library's own errors come out as ``OSError``, as
gzip's, bzip2's and xz's do.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from typing import BinaryIO

import lz4.frame
import zstandard

ZSTD = b"\x28\xb5\x2f\xfd"
LZ4 = b"\x04\x22\x4d\x18"
LZ4_LEGACY = b"\x02\x21\x4c\x18"
MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x5d\x00\x00": "lzma",
         ZSTD: "zstd", LZ4: "lz4", LZ4_LEGACY: "lz4-legacy"}
# zstd's and lz4's skippable frames (magic 0x184D2A50..5F, little-endian): both tools skip any
# number of them, so a tar behind one is still a tar to them; this many are looked past
MAX_SKIPPABLE = 64


class TooLarge(Exception):
    """More than the cap came out of the stream."""


class Unchecked(OSError):
    """Data in a compression recognised by its first bytes that cannot be read here."""


class Capped(io.RawIOBase):
    """A readable stream that raises ``TooLarge`` once more than ``limit`` bytes were read."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        super().__init__()
        self.inner, self.limit, self.count = inner, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        self.count += len(data)
        if self.count > self.limit:
            raise TooLarge(f"more than {self.limit} bytes inflated")
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


def open_capped(raw: BinaryIO, limit: int) -> io.BufferedReader:
    """``raw`` decompressed (by its magic bytes) and capped at ``limit`` inflated bytes."""
    return io.BufferedReader(Capped(decompressed(raw), limit), buffer_size=1024 * 1024)


def compression(raw: BinaryIO) -> tuple[str | None, int]:
    """The compression ``raw`` (seekable, at 0) is in by its first bytes, past any skippable
    frames, and where its data starts; (None, 0) for none of them. Leaves ``raw`` at 0."""
    start = 0
    for _ in range(MAX_SKIPPABLE + 1):
        raw.seek(start)
        head = raw.read(8)
        if not (len(head) == 8 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"):
            raw.seek(0)
            found = [name for magic, name in MAGIC.items() if head.startswith(magic)]
            return (found[0], start) if found else (None, 0)
        start += 8 + int.from_bytes(head[4:], "little")
    raise Unchecked(f"more than {MAX_SKIPPABLE} skippable frames before the data")


def decompressed(raw: BinaryIO) -> BinaryIO:
    """``raw`` (seekable) decompressed by its first bytes, or ``raw`` itself when they name no
    compression; ``Unchecked`` for one that cannot be read here."""
    name, start = compression(raw)
    raw.seek(start)
    if name == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if name == "bzip2":
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if name in ("xz", "lzma"):
        kind = lzma.FORMAT_XZ if name == "xz" else lzma.FORMAT_ALONE
        return lzma.LZMAFile(raw, format=kind)  # type: ignore[return-value]
    if name == "zstd":
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True,
                                                           closefd=False)
        return _errors_as_os(reader, zstandard.ZstdError)
    if name == "lz4":
        return _errors_as_os(lz4.frame.LZ4FrameFile(raw), RuntimeError)
    if name == "lz4-legacy":
        raise Unchecked("lz4's legacy format cannot be read here: compress with lz4's default "
                        "(frame) format")
    return raw


class _OsErrors(io.RawIOBase):
    """A reader whose library's own error (``errors``) comes out as ``OSError``."""

    def __init__(self, inner: BinaryIO, errors: type[Exception]) -> None:
        super().__init__()
        self.inner, self.errors = inner, errors

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        try:
            data = self.inner.read(len(buffer))
        except self.errors as exc:
            raise OSError(f"corrupt compressed data ({exc})") from None
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()


def _errors_as_os(inner: object, errors: type[Exception]) -> BinaryIO:
    return io.BufferedReader(_OsErrors(inner, errors))  # type: ignore[arg-type,return-value]
