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

A spool must never hurt the training it serves (issue 55): a file that cannot be created or
written (a folder under a regular file, a full disk, a read-only mount) is one warning, and
from then on the waiting lines are kept in memory (``memory``, numbered as they were in the
file, bounded by ``MEMORY_BYTES``: past it the oldest are dropped and counted) and are still
sent; only a process that exits before the Deck took them loses them (``lost``). Writing the
acknowledged count is best effort: a stale count only makes a later sync resend lines, which
the server merges.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpodeck.client import spool

log = logging.getLogger("grpodeck.client")

COMPACT_BYTES = 64 * 1024 * 1024  # a delivered prefix smaller than this stays in the file
MEMORY_BYTES = 64 * 1024 * 1024  # waiting lines kept in memory (per spool) once the file fails


@dataclass(frozen=True)
class Chunk:
    """Lines read past the acknowledged prefix: where they started, and the lines as written
    (``start_offset`` -1: read from memory, where only line numbers count)."""
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


def _plain(value: Any) -> Any:
    """A value ``json`` cannot write, as one it can: numpy/torch scalars and arrays through
    ``item``/``tolist``, anything else as its text (the server's model then judges it)."""
    for name in ("item", "tolist"):
        convert = getattr(value, name, None)
        if callable(convert):
            try:
                return convert()
            except (TypeError, ValueError):
                pass
    return str(value)


def why(exc: BaseException) -> str:
    """An OS error as one short line ("No space left on device"), anything else as repr."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return repr(exc)


class LineSpool:
    """An append-only JSON-lines file, its acknowledged prefix, and (optionally) a byte bound on
    what waits. Thread-safe: the training thread may append while the sender reads. ``path``
    None: memory only from the start (nowhere to write)."""

    def __init__(self, path: Path | None, max_pending_bytes: int | None = None,
                 compact: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.max_pending_bytes = max_pending_bytes
        self.compact_enabled = compact
        self.dropped = 0  # lines dropped at the size bound, never sent
        self.unwritable = 0  # items json could not write at all, never sent
        self.lock = threading.Lock()
        self.lines = self.acked_lines = self.offset = self.end = 0
        self.memory: deque[bytes] | None = None  # the waiting lines, once the file failed
        self.memory_size = 0
        self.disk_lines = 0  # lines the file holds (in memory mode)
        self.trouble: str | None = None  # why the file was given up
        self._ack_failed = False
        if self.path is None:
            self.memory, self.trouble = deque(), "no spool folder"
            return
        try:
            self._open(self.path)
        except OSError as exc:
            self.lines = self.acked_lines = self.offset = self.end = 0
            self._to_memory(exc, readable=False)

    def _open(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        # A spool that already holds lines (a reused folder) keeps its acknowledged prefix; a
        # torn last line (a process killed mid-write) is ended, so new lines start clean.
        with path.open("rb+") as fh:
            if fh.seek(0, 2) > 0:
                fh.seek(-1, 2)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
        sizes = _complete_lines(path)
        self.acked_lines = min(spool.acked(path), len(sizes))
        self.offset = sum(sizes[:self.acked_lines])  # bytes the server has acknowledged
        self.lines = len(sizes)
        self.end = sum(sizes)

    def pending(self) -> int:
        """Lines the server has not acknowledged."""
        return self.lines - self.acked_lines

    @property
    def lost(self) -> int:
        """Waiting lines held only in memory: a process that exits now loses them."""
        if self.memory is None:
            return 0
        return self.lines - max(self.acked_lines, self.disk_lines)

    def append(self, items: Iterable[dict[str, Any]]) -> None:
        """Write the items as lines; never raises (a file that fails moves to memory)."""
        data = self._encode(items)
        if not data:
            return
        with self.lock:
            if self.memory is None:
                try:
                    self._write(data)
                except OSError as exc:
                    self._to_memory(exc)
                else:
                    self._bound()
                    return
            self._remember(data)

    def _encode(self, items: Iterable[dict[str, Any]]) -> list[bytes]:
        data: list[bytes] = []
        for item in items:
            try:
                data.append((json.dumps(item, default=_plain) + "\n").encode())
            except (TypeError, ValueError, RecursionError) as exc:
                if not self.unwritable:
                    log.warning("grpodeck: an item cannot be written as JSON (%s); it is "
                                "left out (counted)", why(exc))
                self.unwritable += 1
        return data

    def _write(self, data: list[bytes]) -> None:
        """Append to the file (lock held); on failure the file is cut back to its last whole
        line, so a later sync never reads half of one."""
        assert self.path is not None
        try:
            with self.path.open("ab") as fh:
                fh.writelines(data)
                fh.flush()
        except OSError:
            try:
                os.truncate(self.path, self.end)
            except OSError:
                pass  # a torn line is ended (and dropped as not JSON) when the file is read
            raise
        self.lines += len(data)
        self.end += sum(map(len, data))

    def _to_memory(self, exc: BaseException, readable: bool = True) -> None:
        """Give the file up (lock held): what waits in it moves to memory (or, unreadable,
        is counted as dropped: only a later sync may still find it), one warning."""
        self.trouble = why(exc)
        kept = self._waiting_lines() if readable else None
        self.memory, self.memory_size, self.disk_lines = deque(), 0, self.lines
        if kept is None:
            self._drop_oldest(self.pending())
        else:
            self._remember(kept, count=False)
        log.warning("grpodeck: cannot write the spool %s (%s); what waits is kept in memory "
                    "(up to %d MB) and still sent, but lost if the process exits first",
                    self.path, self.trouble, MEMORY_BYTES // 2**20)

    def _waiting_lines(self) -> list[bytes] | None:
        """The unacknowledged lines of the file, or None when they cannot all be read."""
        assert self.path is not None
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                lines = [line for line, _ in zip(fh, range(self.pending()), strict=False)]
        except OSError:
            return None
        whole = len(lines) == self.pending() and all(line.endswith(b"\n") for line in lines)
        return lines if whole else None

    def _remember(self, data: list[bytes], count: bool = True) -> None:
        """Keep lines in memory (lock held), within the memory bound and the spool's own."""
        assert self.memory is not None
        self.memory.extend(data)
        self.memory_size += sum(map(len, data))
        if count:
            self.lines += len(data)
        bound = min(MEMORY_BYTES, self.max_pending_bytes or MEMORY_BYTES)
        size, excess = self.memory_size, 0
        while size > bound and excess < len(self.memory):
            size -= len(self.memory[excess])
            excess += 1
        self._drop_oldest(excess)

    def _drop_oldest(self, count: int) -> None:
        """Memory mode: the oldest waiting lines go, counted. The file's count stays: lines
        dropped here that the file still holds remain for a later sync."""
        if count > 0:
            self.dropped += count
            self._move_lines(self.acked_lines + count, record=False)

    def unsent(self, max_lines: int, max_bytes: int | None = None) -> Chunk:
        """Up to ``max_lines`` unacknowledged lines (and about ``max_bytes``, at least one)."""
        with self.lock:
            if self.memory is None:
                try:
                    return self._unsent_file(max_lines, max_bytes)
                except OSError as exc:  # the file went away (or the disk failed)
                    self._to_memory(exc, readable=False)
            return Chunk(self.acked_lines, -1, _take(self.memory, max_lines, max_bytes))

    def _unsent_file(self, max_lines: int, max_bytes: int | None) -> Chunk:
        assert self.path is not None
        lines: list[bytes] = []
        size = 0
        with self.path.open("rb") as fh:
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
            if self.memory is not None:
                self._move_lines(chunk.start_line + len(chunk.lines), record=True)
            elif chunk.end_offset > self.offset:
                self._move(chunk.start_line + len(chunk.lines), chunk.end_offset)
                self._compact()

    def ack_all(self) -> None:
        """Nothing left will ever be sent (the run is over on the server)."""
        with self.lock:
            if self.memory is not None:
                self._move_lines(self.lines, record=True)
            else:
                self._move(self.lines, self.end)

    def _move_lines(self, lines: int, record: bool) -> None:
        """Memory mode: forget the lines before ``lines``; with ``record`` (delivered) the
        file's count follows as far as the file goes."""
        before = self.acked_lines
        if lines <= before or self.memory is None:
            return
        for _ in range(min(lines - before, len(self.memory))):
            self.memory_size -= len(self.memory.popleft())
        self.acked_lines = lines
        if record and self.path is not None and before < self.disk_lines:
            self._record(min(lines, self.disk_lines))

    def _move(self, lines: int, offset: int) -> None:
        self.acked_lines, self.offset = lines, offset
        self._record(lines)

    def _record(self, lines: int) -> None:
        """Write the acknowledged count (best effort: a stale one only means a resend)."""
        assert self.path is not None
        try:
            spool.mark_acked(self.path, lines)
        except OSError as exc:
            if not self._ack_failed and self.memory is None:
                log.warning("grpodeck: cannot record what was delivered in %s (%s); a later "
                            "sync may send those lines again (the Deck stores them once)",
                            self.path, why(exc))
            self._ack_failed = True

    def _bound(self) -> None:
        """Past the byte bound: drop the oldest waiting lines, counted (lock held)."""
        excess = self.end - self.offset - (self.max_pending_bytes or 0)
        if self.max_pending_bytes is None or excess <= 0:
            return
        assert self.path is not None
        dropped = freed = 0
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                for line in fh:
                    if freed >= excess or not line.endswith(b"\n"):
                        break
                    dropped, freed = dropped + 1, freed + len(line)
        except OSError:
            return  # the next append tries again (or finds the file gone and moves to memory)
        self.dropped += dropped
        self._move(self.acked_lines + dropped, self.offset + freed)

    def _compact(self) -> None:
        """Copy the waiting tail to a fresh file once the delivered prefix outweighs it (lock
        held). The count is reset first: a crash between the two steps resends (harmless:
        the server replaces a step's groups), never skips. A copy that fails (a full disk)
        leaves the file as it was."""
        waiting = self.end - self.offset
        if not self.compact_enabled or self.offset < max(COMPACT_BYTES, waiting):
            return
        assert self.path is not None
        tmp = self.path.with_name(self.path.name + ".compact")
        try:
            with self.path.open("rb") as src, tmp.open("wb") as dst:
                src.seek(self.offset)
                shutil.copyfileobj(src, dst)
            spool.mark_acked(self.path, 0)
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)
            self._record(self.acked_lines)  # the count may already say 0: put it back
            return
        self.lines -= self.acked_lines
        self.acked_lines, self.offset, self.end = 0, 0, waiting


def _take(lines: deque[bytes], max_lines: int, max_bytes: int | None) -> list[bytes]:
    """The first lines of ``lines``: at most ``max_lines`` and about ``max_bytes`` (>= one)."""
    out: list[bytes] = []
    size = 0
    for line in lines:
        if len(out) >= max_lines or (max_bytes is not None and out
                                     and size + len(line) > max_bytes):
            break
        out.append(line)
        size += len(line)
    return out
