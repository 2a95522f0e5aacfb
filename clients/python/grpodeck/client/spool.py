"""The local metrics spool: every row the trainer logs, in order, plus how many were delivered.

``metrics.jsonl`` holds one JSON row per line, appended before the row is sent; the sidecar
``metrics.jsonl.acked`` holds how many leading lines the server has acknowledged. Whatever lies
past that count when the training child exits (an outage at the end of the run, a child killed
mid-flush) is replayed by the supervisor. For both reporters (``DeckCallback`` and the worker's
``MetricsReporter``) the spool is the send buffer itself: their sender thread
(``grpodeck.client.sender``) posts whatever lies past the acknowledged count. Ingest is
idempotent by (run, step, name), so replaying a row that did arrive is harmless; losing one is
not.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx


def _ack_path(path: Path) -> Path:
    return path.with_name(path.name + ".acked")


def append(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
        fh.flush()


def mark_acked(path: Path, count: int) -> None:
    """Record ``count`` leading lines as delivered (atomic: a crash leaves the old count).

    Each writer has its own temporary file: a dying child's last words and its sender thread
    may record at the same moment, and two writers of one temporary file could interleave into
    a count neither meant. With one each, the later replace wins, and either count is a true
    prefix (at worst some rows are replayed, which ingest absorbs)."""
    ack = _ack_path(path)
    tmp = ack.with_name(f"{ack.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_text(str(count))
        os.replace(tmp, ack)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no empty temporary behind
        raise


def acked(path: Path) -> int:
    """The acknowledged count; 0 when it is missing, unreadable or not a count (a corrupt
    sidecar: resending lines is harmless, skipping them would lose them)."""
    try:
        return max(0, int(_ack_path(path).read_text().strip() or 0))
    except (OSError, ValueError):
        return 0


def unacked(path: Path, start: int | None = None) -> list[dict[str, Any]]:
    """Rows after the acknowledged prefix (or after ``start`` lines); a torn last line (child
    killed mid-write) is skipped."""
    if not path.exists():
        return []
    with path.open() as fh:
        lines = fh.readlines()[acked(path) if start is None else start:]
    out: list[dict[str, Any]] = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "step" in row:
            out.append(row)
    return out


def send_unacked(path: Path, url: str, token: str, timeout: float = 3.0) -> int:
    """One bounded POST of the unacknowledged rows (a dying child's last words); returns how
    many the server took."""
    rows = unacked(path)
    if not rows:
        return 0
    response = httpx.post(url, json={"rows": rows}, timeout=timeout,
                          headers={"Authorization": f"Bearer {token}"})
    response.raise_for_status()
    mark_acked(path, acked(path) + len(rows))
    return len(rows)
