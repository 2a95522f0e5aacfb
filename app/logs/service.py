"""Store a run's log chunks and read them back: the tail for the live tab, all for download.

Why chunks in a table: the web app and the worker may be on different machines, so the output
the worker's files hold travels through the report API and is kept with the run (deleted with
it by ON DELETE CASCADE). A resent chunk (same stream and offset) replaces itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.core.redact import redact
from app.logs.models import RunLogChunk
from app.runs.models import Run
from app.runs.progress import record_stage
from grpodeck.contract.log_markers import MARKERS_STREAM
from grpodeck.contract.wire import LogBatch

TAIL_CHARS = 64_000
MAX_STORED_CHARS = 20_000_000  # per run: a runaway print loop must not fill the database


def stored_chars(db: Session, run_id: int) -> int:
    return db.scalar(select(func.coalesce(func.sum(func.length(RunLogChunk.text)), 0))
                     .where(RunLogChunk.run_id == run_id)) or 0


def store(db: Session, run: Run, batch: LogBatch, secrets: Iterable[str] = ()) -> int:
    """Keep the batch's chunks (until the run's log reaches MAX_STORED_CHARS) and its stage.

    Each chunk is redacted (``app.core.redact``) before it is stored or counted: what is kept
    is what every reader of the run may see. ``secrets``: exact values to remove (the run's
    token, from the request that carries it)."""
    if batch.stage is not None:
        progress = batch.eval_progress
        record_stage(run, batch.stage, progress.done if progress else None,
                     progress.total if progress else None, datetime.now(UTC))
    room = MAX_STORED_CHARS - stored_chars(db, run.id) if batch.chunks else 0
    stored = 0
    secrets = tuple(secrets)
    for chunk in batch.chunks:
        text = redact(chunk.text, secrets) if chunk.text else ""
        if not text or len(text) > room:
            continue
        db.execute(delete(RunLogChunk).where(RunLogChunk.run_id == run.id,
                                             RunLogChunk.stream == chunk.stream,
                                             RunLogChunk.offset == chunk.offset))
        db.add(RunLogChunk(run_id=run.id, stream=chunk.stream, offset=chunk.offset,
                           text=text))
        room -= len(text)
        stored += 1
    db.flush()
    return stored


def tail(db: Session, run_id: int, max_chars: int = TAIL_CHARS) -> tuple[str, bool]:
    """The log's last ``max_chars`` characters in arrival order, and whether more came before."""
    texts: list[str] = []
    size = 0
    rows = db.scalars(select(RunLogChunk.text).where(RunLogChunk.run_id == run_id,
                                                     RunLogChunk.stream != MARKERS_STREAM)
                      .order_by(RunLogChunk.id.desc()))
    for text in rows:
        texts.append(text)
        size += len(text)
        if size >= max_chars:
            break
    else:
        return "".join(reversed(texts)), False
    return "".join(reversed(texts))[-max_chars:], True


def everything(db: Session, run_id: int) -> Iterator[str]:
    """The whole log in arrival order, a chunk at a time (the download streams it)."""
    stmt = (select(RunLogChunk.text).where(RunLogChunk.run_id == run_id,
                                           RunLogChunk.stream != MARKERS_STREAM)
            .order_by(RunLogChunk.id).execution_options(yield_per=100))
    yield from db.scalars(stmt)


def has_logs(db: Session, run_id: int) -> bool:
    return db.scalar(select(RunLogChunk.id).where(RunLogChunk.run_id == run_id).limit(1)) is not None


def opening(db: Session, run_id: int, stream: str = "stdout") -> str:
    """The chunk at offset 0 of a stream: where the worker's preamble is, if it wrote one."""
    return db.scalar(select(RunLogChunk.text).where(
        RunLogChunk.run_id == run_id, RunLogChunk.stream == stream,
        RunLogChunk.offset == 0)) or ""


def stream_tail(db: Session, run_id: int, stream: str, max_chars: int = TAIL_CHARS) -> str:
    """About the last ``max_chars`` characters of one stream, whole chunks in byte order (a
    chunk ends at a line's end, so lines are not cut except the first of a long chunk)."""
    texts: list[str] = []
    size = 0
    rows = db.scalars(select(RunLogChunk.text).where(
        RunLogChunk.run_id == run_id, RunLogChunk.stream == stream)
        .order_by(RunLogChunk.offset.desc()))
    for text in rows:
        texts.append(text)
        size += len(text)
        if size >= max_chars:
            break
    return "".join(reversed(texts))
