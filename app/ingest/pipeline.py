"""What happens to a report batch, in order: names read -> metrics -> rollouts (and their
signals) -> diagnostics -> alerts. The report API, the MLflow API, log imports and the lost-run
watch all go through here, so an imported run gets exactly the treatment of a live one. It
stands above the services it calls: none of them calls another's."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.alerts import service as alerts
from app.core.db import write
from app.diagnostics import Diagnosis
from app.health import service as health
from app.metrics import rollups, samples
from app.metrics.ingest import ingest, store
from app.metrics.names import Row, normalize_row
from app.metrics.reading import Reading, read_rows
from app.rollouts import service as rollouts
from app.runs.models import Run
from app.runs.service import get_run_for_update
from grpodeck.contract.wire import MetricRow, RolloutStep


def normalized(rows: Sequence[MetricRow]) -> list[Row]:
    """Wire rows -> (step, TRL's newest name -> float): done once per batch, before the run's
    lock (nothing to wait for); ``read`` then applies the run's own reading."""
    return [(r.step, normalize_row(r.metrics)) for r in rows]


def read(run: Run, rows: list[Row]) -> list[Row]:
    """Rows in the run's canonical names: its trainer vocabulary (detected from the first keys
    that tell, then kept) and its user mapping, by the reader imports and ``grpodeck diagnose``
    use too. The caller holds the run's write lock: the reading it updates is the run's."""
    before = Reading.from_json(run.metric_reading)
    out, after = read_rows(rows, before, frozenset(run.metric_names or ()))
    if after != before:
        run.metric_reading = after.as_json()
    return out


def merge_by_step(*row_lists: Sequence[Row]) -> list[Row]:
    """One row per step, in step order, later values winning. A single list already in strictly
    increasing step order (what a trainer sends) is returned as is: no copy of every value."""
    lists = [rows for rows in row_lists if rows]
    if len(lists) == 1 and all(a[0] < b[0] for a, b in zip(lists[0], lists[0][1:])):
        return list(lists[0])
    merged: dict[int, dict[str, float]] = {}
    for rows in row_lists:
        for step, metrics in rows:
            merged.setdefault(step, {}).update(metrics)
    return sorted(merged.items())


def _note_names(run: Run, rows: Sequence[Row]) -> None:
    """Keep the run's set of metric names: a new one changes which charts the page draws."""
    known = set(run.metric_names or [])
    seen = {name for _, metrics in rows for name in metrics}
    if not seen <= known:
        run.metric_names = sorted(known | seen)


def receive(db: Session, run: Run, rows: Sequence[Row],
            rollout_steps: Sequence[RolloutStep] = (), *, track_progress: bool = True) -> int:
    """Store normalised rows and rollouts, then re-diagnose; returns the metric points stored.

    ``track_progress=False`` for imports: their steps say nothing about a live run's pace, and
    they are settled at once (``rollups.settle``), where a live run's batches are left to the
background settler (``app/metrics/settler.py``). System samples are also kept at their own
    time (``app/metrics/samples.py``), before the rows of one step are merged into one.
    """
    samples.store(db, run.id, rows)
    signal_rows = rollouts.store(db, run.id, rollout_steps)
    all_rows = merge_by_step(rows, signal_rows)
    accepted = ingest(db, run, all_rows) if track_progress else store(db, run, all_rows)
    _note_names(run, all_rows)
    if not track_progress or rollups.backlog(run) >= rollups.SETTLE_EVERY_STEPS:
        rollups.settle(db, run)  # an import is read at once; a run nobody reads stays bounded
    if all_rows:
        observe(db, run, all_rows)
    return accepted


# An import writes this many values per transaction (~50 ms on SQLite), and this many rollout
# steps: a heartbeat or a report waits for one batch at most, never for the whole import.
IMPORT_BATCH_VALUES = 20_000
IMPORT_BATCH_ROLLOUT_STEPS = 20
# After each batch an import stands aside as long as the batch held the store, up to this: a
# writer in this process takes the lock at once, and another process (the scheduler), whose
# SQLite busy handler polls up to every 100 ms, finds the store free half of the time.
IMPORT_MAX_PAUSE_S = 0.1


def receive_import(db: Session, run_id: int, rows: Sequence[Row],
                   rollout_steps: Sequence[RolloutStep] = ()) -> Run:
    """Store an imported run's rollouts and rows, then diagnose it once: what ``receive(...,
    track_progress=False)`` does, but in batches, each a short transaction of its own under the
    run's lock, committed. One transaction held SQLite's only write lock for the whole import:
    heartbeats and reports waited for it, and the scheduler got "database is locked" (issue 55).
    Returns the run as stored."""
    signal_rows: list[Row] = []
    for start in range(0, len(rollout_steps), IMPORT_BATCH_ROLLOUT_STEPS):
        with _import_batch(db, run_id):
            signal_rows += rollouts.store(
                db, run_id, rollout_steps[start:start + IMPORT_BATCH_ROLLOUT_STEPS])
    all_rows = merge_by_step(rows, signal_rows)
    for batch in _value_batches(all_rows, IMPORT_BATCH_VALUES):
        with _import_batch(db, run_id) as run:
            store(db, run, batch)
            _note_names(run, batch)
            rollups.settle(db, run)  # an import is read at once: its batch is spread now
    with _import_batch(db, run_id, pause=False) as run:
        if all_rows:
            observe(db, run, all_rows)
    return run


@contextmanager
def _import_batch(db: Session, run_id: int, pause: bool = True) -> Iterator[Run]:
    """The run, locked, in a transaction committed when the block ends; then (``pause``) a
    rest as long as the transaction held the store, up to ``IMPORT_MAX_PAUSE_S``, so that
    other writers get in between two batches. LookupError: the run was deleted meanwhile."""
    started = time.monotonic()
    with write(db):
        run = get_run_for_update(db, run_id)
        if run is None:
            raise LookupError(f"run {run_id} was deleted while it was being imported")
        yield run
    if pause:
        time.sleep(min(time.monotonic() - started, IMPORT_MAX_PAUSE_S))


def _value_batches(rows: list[Row], values: int) -> Iterator[list[Row]]:
    """Consecutive rows, cut once a batch holds ``values`` values (a row is never split)."""
    batch: list[Row] = []
    held = 0
    for row in rows:
        batch.append(row)
        held += len(row[1])
        if held >= values:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def observe(db: Session, run: Run, rows: list[Row], now: datetime | None = None) -> Diagnosis:
    """Diagnose new rows (or none, to re-check time-based findings), then open, update or
    resolve the run's alerts from what the findings did, in the same transaction: the outbox
    is written with them. Returns the raw diagnosis."""
    now = now or datetime.now(UTC)
    diagnosis, stored = health.observe(db, run, rows, now)
    if stored is not None:
        alerts.on_findings(db, run, stored, now)
    return diagnosis
