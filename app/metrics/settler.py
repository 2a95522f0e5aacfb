"""The settling service: a background thread keeps the live runs' inboxes spread.

Why: settling (``rollups.settle``) takes the run's write lock; done by the first reader, a page
waited behind the run's batches and they behind it. Here a thread settles every run with waiting
steps, at least every ``settle_seconds``. It runs where ``settle_in`` says: in each web process
(woken at once by a batch received there, ``wake``), or in the scheduler, so that a web
process, one interpreter, spends its CPU on requests (``grpodeck up``, the compose file).
Readers merge what still waits (``app/metrics/waiting.py``), so nothing a person sees waits
for this.

Several web processes: each pass takes a run with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL (a
run being written, or settled by another process, is skipped until the next pass: the settler
never queues behind ingest) and re-checks that something still waits, so a run is settled once;
on SQLite the write transaction serialises them (``BEGIN IMMEDIATE``). Settling is idempotent,
so a settle repeated after a crash changes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.core.db import begin_write
from app.metrics import rollups
from app.runs.models import Run

log = logging.getLogger("grpodeck.settler")
MIN_GAP_SECONDS = 0.1  # between two passes: a burst of batches is settled together
_wake = threading.Event()


def wake() -> None:
    """A batch was stored in this process: settle soon rather than at the next tick."""
    _wake.set()


def waiting_runs(db: Session) -> list[int]:
    """Runs with steps waiting to be settled."""
    ids = list(db.scalars(select(Run.id).where(Run.rollups_stale_lo.is_not(None))
                          .order_by(Run.id)))
    db.rollback()  # no snapshot held between the runs' own transactions
    return ids


def settle_run(db: Session, run_id: int) -> bool:
    """Settle one run in its own transaction; False when nothing waited or it was locked."""
    begin_write(db)
    run = db.scalars(select(Run).where(Run.id == run_id, Run.rollups_stale_lo.is_not(None))
                     .with_for_update(skip_locked=True)
                     .execution_options(populate_existing=True)).first()
    if run is None:
        db.rollback()
        return False
    rollups.settle(db, run)
    db.commit()
    return True


def settle_all(make_session: Callable[[], Session]) -> int:
    """One pass over every run with waiting steps; returns the runs settled."""
    settled = 0
    with make_session() as db:
        for run_id in waiting_runs(db):
            try:
                settled += settle_run(db, run_id)
            except SQLAlchemyError as exc:  # busy, or the run deleted meanwhile: next pass
                db.rollback()
                log.warning("settling run %s failed: %s", run_id, exc)
        _vacuum_if_owed(db.get_bind(), settled)
    return settled


VACUUM_EVERY_SECONDS = 20.0
_vacuumed_at = 0.0
_owed = False  # runs were settled since the inbox was last vacuumed


def _vacuum_if_owed(bind: Engine | Connection, settled: int) -> None:
    """While runs are settled, vacuum the inbox every ``VACUUM_EVERY_SECONDS``; on the first
    pass that settles nothing, vacuum what the last busy seconds left at once."""
    global _owed
    _owed = _owed or settled > 0
    if _owed and vacuum_inbox(bind, force=settled == 0):
        _owed = False


def vacuum_inbox(bind: Engine | Connection, force: bool = False) -> bool:
    """PostgreSQL: ``VACUUM metric_inbox`` at most every ``VACUUM_EVERY_SECONDS`` while runs
    are being settled. Every step passes through the inbox and is deleted when settled, so its
    dead rows were most of a busy database's size until autovacuum's next round (a minute
    away: 45 bytes a point right after a 100k-step run, against 6 once vacuumed, issue 57).
    A plain VACUUM blocks no writer, frees the rows for the next batches and gives the empty
    pages at the end back. True when it ran."""
    global _vacuumed_at
    engine = bind.engine if isinstance(bind, Connection) else bind
    if engine.dialect.name != "postgresql":
        return False
    now = time.monotonic()
    if not force and now - _vacuumed_at < VACUUM_EVERY_SECONDS:
        return False
    _vacuumed_at = now
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM metric_inbox"))
    except SQLAlchemyError as exc:  # never a reason for the settler to stop
        log.warning("vacuuming metric_inbox failed: %s", exc)
        return False
    return True


class Settler:
    """The background thread (started and stopped by the web app's lifespan)."""

    def __init__(self, make_session: Callable[[], Session], every_seconds: float) -> None:
        self.make_session = make_session
        self.every_seconds = every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="grpodeck-settler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        _wake.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            _wake.wait(timeout=self.every_seconds)
            _wake.clear()
            if self._stop.is_set():
                return
            try:
                settle_all(self.make_session)
            except Exception:  # the settler must outlive one bad pass
                log.exception("settle pass failed")
            self._stop.wait(MIN_GAP_SECONDS)


def start_here(process: str, make_session: Callable[[], Session], every_seconds: float,
               settle_in: str) -> Settler | None:
    """The started settler of this ``process`` ("web" or "scheduler") when ``settle_in`` names
    it and the interval is on; else None."""
    if process != settle_in or every_seconds <= 0:
        return None
    settler = Settler(make_session, every_seconds)
    settler.start()
    return settler
