"""Decompress an upload with a cap on the inflated bytes, counted while streaming.

Why count while reading: a compressed upload's headers (a tar member's size, gzip's ISIZE)
are the sender's word, and reading a whole member list first (``getmembers``) means inflating
all of it: 2 GiB of zeros arrive as 2 MB of gzip. The reader here stops with ``TooLarge`` as
soon as more than the cap has come out, whatever the headers said; gzip, bzip2 and xz are
recognised by their first bytes, anything else is read as it is (and counted too).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from typing import BinaryIO


class TooLarge(Exception):
    """More than the cap came out of the stream."""


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
    head = raw.read(6)
    raw.seek(0)
    inner: BinaryIO
    if head.startswith(b"\x1f\x8b"):
        inner = gzip.GzipFile(fileobj=raw, mode="rb")
    elif head.startswith(b"BZh"):
        inner = bz2.BZ2File(raw)  # type: ignore[assignment]
    elif head.startswith(b"\xfd7zXZ\x00"):
        inner = lzma.LZMAFile(raw)  # type: ignore[assignment]  # noqa: SIM115 - Capped closes it
    else:
        inner = raw
    return io.BufferedReader(Capped(inner, limit), buffer_size=1024 * 1024)
