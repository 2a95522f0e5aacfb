"""One append-only JSON-lines spool file and the prefix of it the server has acknowledged.

The Sender keeps two: the metric rows (the run's record: never dropped, never rewritten, the
worker's supervisor replays it) and the captured rollouts (samples, but not to be lost
silently either). Both are written before any attempt to send and acknowledged only when the
server took them, so an outage or a process exit loses nothing that reached the disk.

Rollouts are large (a default capture is ~0.3 MB per step), so their spool takes a size bound,
``max_pending_bytes``, on what waits undelivered: past it the *oldest* waiting lines are
dropped (the acknowledged prefix moves past them) and counted in ``dropped``, so the newest
steps (the end of a run, where collapses show) survive and the loss is reported, never silent.
The file itself stays bounded too: once the delivered prefix is larger than what waits (and
than ``COMPACT_BYTES``), the waiting tail is copied to a fresh file.

Acknowledgements are positional (``Chunk`` holds where its lines started), so a drop at the
bound that happens while those lines are in flight never moves the prefix twice.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpodeck.client import spool

COMPACT_BYTES = 64 * 1024 * 1024  # a delivered prefix smaller than this stays in the file


@dataclass(frozen=True)
class Chunk:
    """Lines read past the acknowledged prefix: where they started, and the lines as written."""
    start_line: int
    start_offset: int
    lines: list[bytes]

    @property
    def end_offset(self) -> int:
        return self.start_offset + sum(len(line) for line in self.lines)


def _complete_lines(path: Path) -> list[int]:
    """The byte length of each complete (newline-ended) line of the file."""
    with path.open("rb") as fh:
        return [len(line) for line in fh if line.endswith(b"\n")]


class LineSpool:
    """An append-only JSON-lines file, its acknowledged prefix, and (optionally) a byte bound on
    what waits. Thread-safe: the training thread may append while the sender reads."""

    def __init__(self, path: Path, max_pending_bytes: int | None = None,
                 compact: bool = False) -> None:
        self.path = Path(path)
        self.max_pending_bytes = max_pending_bytes
        self.compact_enabled = compact
        self.dropped = 0  # lines dropped at the size bound, never sent
        self.lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        # A spool that already holds lines (a reused folder) keeps its acknowledged prefix; a
        # torn last line (a process killed mid-write) is ended, so new lines start clean.
        with self.path.open("rb+") as fh:
            if fh.seek(0, 2) > 0:
                fh.seek(-1, 2)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
        sizes = _complete_lines(self.path)
        self.acked_lines = min(spool.acked(self.path), len(sizes))
        self.offset = sum(sizes[:self.acked_lines])  # bytes the server has acknowledged
        self.lines = len(sizes)
        self.end = sum(sizes)

    def pending(self) -> int:
        """Lines the server has not acknowledged."""
        return self.lines - self.acked_lines

    def append(self, items: Iterable[dict[str, Any]]) -> None:
        data = [(json.dumps(item) + "\n").encode() for item in items]
        if not data:
            return
        with self.lock, self.path.open("ab") as fh:
            fh.writelines(data)
            fh.flush()
            self.lines += len(data)
            self.end += sum(map(len, data))
            self._bound()

    def unsent(self, max_lines: int, max_bytes: int | None = None) -> Chunk:
        """Up to ``max_lines`` unacknowledged lines (and about ``max_bytes``, at least one)."""
        lines: list[bytes] = []
        size = 0
        with self.lock, self.path.open("rb") as fh:
            start_line, start_offset = self.acked_lines, self.offset
            fh.seek(start_offset)
            for line in fh:
                full = len(lines) >= max_lines or (
                    max_bytes is not None and lines and size + len(line) > max_bytes)
                if not line.endswith(b"\n") or full:
                    break
                lines.append(line)
                size += len(line)
        return Chunk(start_line, start_offset, lines)

    def ack(self, chunk: Chunk) -> None:
        """The server took ``chunk``: move the prefix past it (unless a drop already did)."""
        if not chunk.lines:
            return
        with self.lock:
            if chunk.end_offset > self.offset:
                self._move(chunk.start_line + len(chunk.lines), chunk.end_offset)
            self._compact()

    def ack_all(self) -> None:
        """Nothing left will ever be sent (the run is over on the server)."""
        with self.lock:
            self._move(self.lines, self.end)

    def _move(self, lines: int, offset: int) -> None:
        self.acked_lines, self.offset = lines, offset
        spool.mark_acked(self.path, lines)

    def _bound(self) -> None:
        """Past the byte bound: drop the oldest waiting lines, counted (lock held)."""
        excess = self.end - self.offset - (self.max_pending_bytes or 0)
        if self.max_pending_bytes is None or excess <= 0:
            return
        dropped = freed = 0
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            for line in fh:
                if freed >= excess or not line.endswith(b"\n"):
                    break
                dropped, freed = dropped + 1, freed + len(line)
        self.dropped += dropped
        self._move(self.acked_lines + dropped, self.offset + freed)

    def _compact(self) -> None:
        """Copy the waiting tail to a fresh file once the delivered prefix outweighs it (lock
        held). The count is reset first: a crash between the two steps resends (harmless:
        the server replaces a step's groups), never skips."""
        waiting = self.end - self.offset
        if not self.compact_enabled or self.offset < max(COMPACT_BYTES, waiting):
            return
        tmp = self.path.with_name(self.path.name + ".compact")
        with self.path.open("rb") as src, tmp.open("wb") as dst:
            src.seek(self.offset)
            shutil.copyfileobj(src, dst)
        spool.mark_acked(self.path, 0)
        os.replace(tmp, self.path)
        self.lines -= self.acked_lines
        self.acked_lines, self.offset, self.end = 0, 0, waiting
