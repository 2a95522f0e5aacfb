"""A run's stored rows as a file, one row per step: JSON Lines or CSV, the formats
``grpodeck diagnose`` and ``grpodeck import`` read back. What the run page's Export control,
``GET /api/runs/{id}/export`` and ``grpodeck export`` write.

Why a file of rows: a run's findings equal ``grpodeck diagnose`` of its rows
(``tests/app/test_one_diagnosis.py``); without an export nobody could check that, take a run
elsewhere, or read it with pandas. Rows hold the canonical names the checks read.

* Settled points and the steps still waiting in the inbox, merged as every reader merges them
  (``app/metrics/waiting.py``): the inbox is read once, first; no lock is taken.
* Streamed in chunks of ``CHUNK_STEPS`` steps (a rollup bucket of level ``CHUNK_LEVEL``): a
  100k-step run of 30 metrics is never in memory at once. The chunks are the buckets that hold
  settled points plus those of the waiting steps, so a run whose steps are far apart is not
  walked step range by step range.
* NaN and infinities are kept as their text (``"nan"``, ``"inf"``, ``"-inf"``), which JSON can
  hold and every reader parses back as the number (``app.metrics.names.to_float``); a CSV cell
  with no value on that step is empty, never 0.
* The names are those the run had when the export began: the CSV's header comes first.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat

import orjson
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.metrics import store, waiting
from app.metrics.names import Row
from app.metrics.rollups import width
from app.metrics.series import Series, all_finite, load_series
from app.runs.models import Run

FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv"}
CHUNK_LEVEL = 3
CHUNK_STEPS = width(CHUNK_LEVEL)  # 4,096 steps: ~120k values for a TRL run of 30 metrics
_SETTLED_CHUNKS = text("SELECT DISTINCT bucket FROM metric_rollups WHERE run_id = :run AND "
                       "level = :level")


@dataclass(frozen=True)
class Snapshot:
    """What an export covers, fixed when it begins: the names, the waiting rows, the chunks."""

    run_id: int
    names: list[str]
    waiting: list[Row]
    chunks: list[int]


def snapshot(db: Session, run: Run) -> Snapshot:
    """The inbox first, then the settled chunks (a settle in between shows its steps in both,
    merged by step, never in neither)."""
    pending = waiting.rows(db, run)
    names = sorted(set(store.run_names(db, run.id)).union(*(m for _, m in pending)))
    settled = {int(b) for (b,) in db.connection().execute(
        _SETTLED_CHUNKS, {"run": run.id, "level": CHUNK_LEVEL})}
    chunks = sorted(settled | {step // CHUNK_STEPS for step, _ in pending})
    return Snapshot(run.id, names, pending, chunks)


Table = list[tuple]  # per step: (step, the value of each of the snapshot's names or None)


def chunk_table(db: Session, snap: Snapshot, chunk: int) -> Table:
    """One chunk's steps in order, a value (or None) per name: settled points with the waiting
    ones merged in (a waiting value wins: a re-sent step)."""
    lo, hi = chunk * CHUNK_STEPS, (chunk + 1) * CHUNK_STEPS - 1
    settled = load_series(db, snap.run_id, snap.names or None, after=lo - 1, through=hi)
    inside = [row for row in snap.waiting if lo <= row[0] <= hi]
    merged = waiting.merge(settled, waiting.by_name(inside, snap.names))
    return table(snap.names, [merged.get(name) for name in snap.names])


def table(names: list[str], columns: list[Series | None]) -> Table:
    """Per-name series as rows. Where every series has the same steps (a trainer logs all its
    metrics each step) the rows are the columns zipped, in C: a Python step per value was
    most of a 100k-step export's time."""
    present = [c for c in columns if c is not None]
    if not present:
        return []
    steps = present[0].steps
    if all(c.steps == steps for c in present):
        return list(zip(steps, *(c.values if c is not None else repeat(None) for c in columns)))
    rows: dict[int, list[float | None]] = {}
    for at, column in enumerate(columns):
        if column is None:
            continue
        for step, value in zip(column.steps, column.values, strict=True):
            rows.setdefault(int(step), [None] * len(names))[at] = value
    return [(step, *rows[step]) for step in sorted(rows)]


def _text(value: float) -> float | str:
    return value if math.isfinite(value) else repr(value)  # nan, inf, -inf


def jsonl(names: list[str], rows: Table) -> str:
    """One JSON object per step: ``{"step": 3, "reward": 0.5, "loss": "nan"}`` (a name with
    no value on that step is left out)."""
    out = []
    for step, *values in rows:
        pairs = zip(names, values) if None not in values else (
            (n, v) for n, v in zip(names, values) if v is not None)
        row: dict[str, float | str] = {"step": step, **dict(pairs)}
        if not all_finite(row.values()):
            row = {k: _text(v) for k, v in row.items()}
        out.append(orjson.dumps(row))
    return b"".join(line + b"\n" for line in out).decode()


def csv_text(rows: Iterable[Sequence[object]]) -> str:
    """CSV lines: a float as ``str`` writes it (the shortest exact text; ``nan``, ``inf``), None
    as an empty cell (no value on that step, never 0)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def lines(db: Session, run: Run, fmt: str) -> Iterator[str]:
    """The export's text, a chunk at a time; each chunk's read is its own short transaction."""
    snap = snapshot(db, run)
    db.rollback()
    if fmt == "csv":
        yield csv_text([["step", *snap.names]])
    for chunk in snap.chunks:
        rows = chunk_table(db, snap, chunk)
        db.rollback()
        yield csv_text(rows) if fmt == "csv" else jsonl(snap.names, rows)


def filename(run: Run, fmt: str) -> str:
    """``run-7-grpo-gsm8k.csv``: the id, the name in safe characters, the format."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", run.name or "").strip("-.")[:60]
    return f"run-{run.id}{'-' + slug if slug else ''}.{fmt}"
