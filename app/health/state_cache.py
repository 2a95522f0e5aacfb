"""The live diagnostics state of each run, kept decoded in this web process between batches.

Each run's state is about 100 kB of JSON. Decoding it and writing it back on every report batch
cost more than everything else ingest does (issue 7, load drill), so the decoded state stays here
and is written back, to its own table ``diagnostics_states`` (not the runs row, issue 12), at most
every ``diagnostics_persist_seconds`` (and always for runs that are not live). Correctness does
not rest on this cache: every update bumps ``runs.diagnostics_revision`` in the same transaction,
and an entry is used only if its revision is the stored one. Otherwise (another web process, a
restart, a rolled-back transaction) the stored state is loaded and the metric points stored after
its watermark ``through`` are replayed into it; the state itself ignores steps it has already seen.

The detectors run at a bounded rate per live run (``diagnostics_min_interval_seconds``): a batch
that arrives sooner after the last evaluation only feeds the state (cheap, per batch), and the next
batch after the interval evaluates everything seen so far. Ending a run and the lost-run check
always evaluate, and so does every batch of a run's first ``EVERY_BATCH_BELOW_STEP`` steps: the
state is tiny then (evaluating costs nothing) and a smoke run's exact signals (zero reward
spread on every row) must reach its alerts before the run ends, not after.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import get_settings
from app.diagnostics import Diagnosis, DiagnosticsState, RunContext
from app.health.models import DiagnosticsRecord
from app.metrics import chunks, inbox, store
from app.metrics.names import Row
from app.runs import lifecycle
from app.runs.models import Run

MAX_RUNS = 256  # live runs served by one process; older entries are simply reloaded
MAX_PENDING_ROWS = 2_000  # rows held back between two evaluations before they are fed anyway
EVERY_BATCH_BELOW_STEP = 20  # a smoke run's batches are all evaluated (see above)
WINDOW_CHUNKS = 16  # chunks of steps (16,384 steps) replayed at a time


@dataclass
class _Entry:
    revision: int
    state: DiagnosticsState
    through: int
    persisted_at: float
    evaluated_at: float = 0.0
    pending: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # not yet fed


_entries: OrderedDict[int, _Entry] = OrderedDict()
_guard = threading.Lock()


def _stored_rows(db: Session, run_id: int, after: int) -> Iterator[list[Row]]:
    """Values stored after ``after`` as rows by step, ``WINDOW_CHUNKS`` chunks of steps at a
    time (a 1M-step run's history is 30M values: as one list of dicts it took gigabytes): the
    settled points, and over them the inbox's steps that ``rollups.settle`` has not spread yet
    (newer: a re-sent step). The inbox is read first: a settle committing in between shows its
    steps twice, never not at all."""
    waiting = inbox.pending(db, run_id, after)
    present = sorted(set(store.chunk_indexes(db, run_id, after))
                     | {chunks.chunk_of(step) for step, _ in waiting})
    for i in range(0, len(present), WINDOW_CHUNKS):
        lo = max(after + 1, present[i] << chunks.CHUNK_BITS)
        hi = ((present[min(i + WINDOW_CHUNKS, len(present)) - 1] + 1) << chunks.CHUNK_BITS) - 1
        rows: dict[int, dict[str, float]] = {}
        for name, (steps, values) in store.read(db, run_id, after=lo - 1, through=hi).items():
            for step, value in zip(steps.tolist(), values.tolist(), strict=True):
                rows.setdefault(step, {})[name] = value
        for step, metrics in waiting:
            if lo <= step <= hi:
                rows.setdefault(step, {}).update(metrics)
        if rows:
            yield sorted(rows.items())


def _load(db: Session, run: Run, context: RunContext,
          rows: list[tuple[int, dict[str, float]]]) -> tuple[DiagnosticsState, int, bool]:
    """(state, watermark, replayed): the stored state brought up to date with stored points.

    ``rows`` (this batch, already stored) at or below the stored watermark cannot be replayed
    into the bucketed history: the state is then marked stale and rebuilt before its next
    diagnosis."""
    state, through = None, -1
    record = db.get(DiagnosticsRecord, run.id)
    if record is not None:
        try:
            state, through = DiagnosticsState.from_json(record.state), record.through
        except ValueError:  # an older state format: start afresh rather than fail ingest
            state, through = None, -1
    if state is None:
        state = DiagnosticsState.new(context)
    if state.stale or (rows and min(step for step, _ in rows) <= through):
        state.stale = True
        return state, max([through, *(step for step, _ in rows)]), True
    replayed = False
    for window in _stored_rows(db, run.id, through):
        state.feed(window, context)
        through, replayed = max(through, window[-1][0]), True
    if replayed:
        state.update([], context)
    return state, through, replayed


def rebuild(db: Session, run: Run, context: RunContext) -> tuple[DiagnosticsState, int]:
    """A fresh state fed the run's whole stored history (points and waiting steps, a re-sent
    step's latest values): what ``grpodeck diagnose`` of the same rows would build."""
    state, through = DiagnosticsState.new(context), -1
    for window in _stored_rows(db, run.id, -1):
        state.feed(window, context)
        through = window[-1][0]
    return state, through


def _persist(db: Session, run_id: int, state: DiagnosticsState, through: int) -> None:
    record = db.get(DiagnosticsRecord, run_id)
    if record is None:
        db.add(DiagnosticsRecord(run_id=run_id, state=state.to_json(), through=through))
    else:
        record.state, record.through = state.to_json(), through


def update(db: Session, run: Run, rows: list[tuple[int, dict[str, float]]],
           context: RunContext) -> Diagnosis | None:
    """Feed ``rows`` (already stored in this transaction; one per step, in step order: see
    ``app.ingest.pipeline.merge_by_step``) and return the diagnosis,
    or None when the detectors were not run this time (see the rate bound above).

    Rows at or below a step already taken in (a re-send, an out-of-order batch) mark the state
    stale: it is rebuilt from the stored rows at its next evaluation (rate-bounded like any
    evaluation), so a run's findings never depend on the order its batches arrived in."""
    with _guard:
        entry = _entries.get(run.id)
    now = time.monotonic()
    live = lifecycle.is_live(run)
    if entry is not None and entry.revision == run.diagnostics_revision:
        state, through = entry.state, entry.through
        persisted_at, evaluated_at = entry.persisted_at, entry.evaluated_at
        pending = [*entry.pending, *rows]  # a new list: a rolled-back batch leaves no trace
        if rows and min(step for step, _ in rows) <= through:
            state.stale = True
    elif not run.diagnostics_revision and db.get(DiagnosticsRecord, run.id) is None:
        # Never diagnosed: every transaction that stores points also bumps the revision, so the
        # only points stored are this batch's rows. Reading them back (what ``_load`` would do)
        # cost a run's first batch more than storing them.
        state, through, pending = DiagnosticsState.new(context), -1, list(rows)
        persisted_at = evaluated_at = 0.0
    else:  # the replay includes this batch's rows: they were stored before diagnostics ran
        state, through, replayed = _load(db, run, context, rows)
        pending = list(rows) if not replayed else []
        persisted_at = evaluated_at = 0.0
    if state.stale:
        pending = []  # the rebuild reads every stored row, these included
    settings = get_settings()
    # A stale state is written back at once: a restart before its rebuild must rebuild too,
    # not replay past the old watermark and miss the rows that arrived below it.
    persist = (not live or state.stale
               or now - persisted_at >= settings.diagnostics_persist_seconds)
    diagnosis = None
    early = bool(rows) and max(step for step, _ in rows) < EVERY_BATCH_BELOW_STEP
    if early or not (rows and live
                     and now - evaluated_at < settings.diagnostics_min_interval_seconds):
        if state.stale:
            state, through = rebuild(db, run, context)
        diagnosis, evaluated_at, pending = state.update(pending, context), now, []
    elif not state.stale and (persist or len(pending) > MAX_PENDING_ROWS):
        state.feed(pending, context)  # batches between evaluations are fed in one go
        pending = []
    if rows:
        through = max(through, max(step for step, _ in rows))
    if persist:
        _persist(db, run.id, state, through)
        persisted_at = now
    run.diagnostics_revision = (run.diagnostics_revision or 0) + 1
    if not live:  # imported or ended: written back in full, nothing worth keeping in memory
        forget(run.id)
        return diagnosis
    with _guard:
        _entries[run.id] = _Entry(run.diagnostics_revision, state, through, persisted_at,
                                  evaluated_at, pending)
        _entries.move_to_end(run.id)
        while len(_entries) > MAX_RUNS:
            _entries.popitem(last=False)
    return diagnosis


def last_diagnosis(run_id: int) -> Diagnosis:
    """The diagnosis of the run's last evaluation in this process (healthy if none)."""
    with _guard:
        entry = _entries.get(run_id)
    return entry.state.diagnosis if entry is not None else Diagnosis("healthy", [])


def forget(run_id: int) -> None:
    with _guard:
        _entries.pop(run_id, None)


def current_diagnosis(db: Session, run: Run) -> Diagnosis | None:
    """The run's latest diagnosis (for its coverage: what was read, what was not checked):
    this process's entry when it is current, else the stored state's (only its ``diagnosis``
    part is read from the database, not the whole state); None before the first batch."""
    with _guard:
        entry = _entries.get(run.id)
    if entry is not None and entry.revision == run.diagnostics_revision:
        return entry.state.diagnosis
    stored = db.scalar(select(DiagnosticsRecord.state["diagnosis"])
                       .where(DiagnosticsRecord.run_id == run.id))
    if not isinstance(stored, dict):
        return None
    try:
        return Diagnosis.from_dict(stored)
    except (KeyError, TypeError, ValueError):  # a state stored by an older version
        return None
