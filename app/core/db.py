"""Engine, session factory and the declarative base.

Only the web app holds database credentials; workers report over HTTP. SQLite gets WAL (page
polls read while ingest writes) and one writer at a time per process, handed over through a
lock instead of SQLite's busy handler (see ``_SerialWriterConnection``).
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import Depends
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from app.core.config import get_settings
from app.core.resources import data_path
from grpodeck.contract.tasks import private_folder


class Base(DeclarativeBase):
    pass


_WRITE_START = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|BEGIN\s+IMMEDIATE|BEGIN\s+EXCLUSIVE)\b",
                          re.IGNORECASE)
_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()
# Past this, give up on the in-process hand-over and let SQLite's busy timeout decide.
WRITE_LOCK_WAIT_SECONDS = 30.0


def _write_lock(database: str) -> threading.Lock:
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(str(Path(database).resolve()), threading.Lock())


class _SerialWriterCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.connection.before_statement(sql)  # type: ignore[attr-defined]
        try:
            return super().execute(sql, parameters)
        finally:
            self.connection.after_statement()  # type: ignore[attr-defined]

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:
        self.connection.before_statement(sql)  # type: ignore[attr-defined]
        try:
            return super().executemany(sql, seq_of_parameters)
        finally:
            self.connection.after_statement()  # type: ignore[attr-defined]


class _SerialWriterConnection(sqlite3.Connection):
    """SQLite allows one writer; the others wait in its busy handler, which sleeps and retries
    (up to 100 ms a nap, in no order). Under 20 reporting runs that made ingest p99 seconds long.
    Here a writing transaction first takes a per-database lock in this process, so the next
    writer starts the moment the previous one commits; SQLite's busy timeout still covers other
    processes. The lock is taken at the statement that opens the write transaction and released
    when it ends (commit, rollback, close, or a failed start)."""

    def __init__(self, database: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        self._lock = _write_lock(database)
        self._holding = False

    def cursor(self, factory: Any = _SerialWriterCursor) -> sqlite3.Cursor:  # type: ignore[override]
        return super().cursor(factory)

    def before_statement(self, sql: str) -> None:
        if not self._holding and not self.in_transaction and _WRITE_START.match(sql):
            self._holding = self._lock.acquire(timeout=WRITE_LOCK_WAIT_SECONDS)

    def after_statement(self) -> None:
        if self._holding and not self.in_transaction:
            self._release()

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            self._lock.release()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.after_statement()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.after_statement()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()


def begin_write(db: Session) -> None:
    """Start this session's write transaction now, before it reads what it will change.

    On SQLite that is ``BEGIN IMMEDIATE`` (reads that follow see the latest commit and no other
    writer can slip in between); PostgreSQL callers lock rows with ``FOR UPDATE`` instead."""
    if db.get_bind().dialect.name != "sqlite":
        return
    connection = db.connection()
    dbapi = connection.connection.dbapi_connection
    if dbapi is not None and not dbapi.in_transaction:
        connection.exec_driver_sql("BEGIN IMMEDIATE")



@contextmanager
def write(db: Session) -> Iterator[None]:
    """One route's write transaction, held on one thread: commit on success; on any error (a
    refused transition, a 409) roll back before the route returns, so a write lock is never held
    into the session's teardown, which FastAPI runs on another trip to the thread pool (with more
    writers than threads that trip never came: the SQLite stall of ``locked_run``)."""
    try:
        yield
    except BaseException:
        db.rollback()
        raise
    db.commit()

DEFAULT_LOCK_TIMEOUT_S = 10.0  # SQLite's busy timeout where no setting applies (migrations)


def _sqlite_pragmas(dbapi_conn, _record, busy_ms: int = 10_000) -> None:  # type: ignore[no-untyped-def]
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    # In WAL mode NORMAL syncs at checkpoints, not at every commit: still corruption-safe, and a
    # commit no longer waits for the disk (issue 7 load drill: ~15 ms per ingest batch).
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    # A commit that fills the WAL past this checkpoints it there and then, on the request that
    # committed (copy and fsync: a 1,000-page default made it ~20 % of a report batch,
    # bench/ingest.py). ``checkpoint_wal`` does it after the reply instead; this is the backstop.
    cur.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    cur.close()


WAL_AUTOCHECKPOINT_PAGES = 16_384  # 64 MiB of 4 KiB pages
CHECKPOINT_EVERY_SECONDS = 1.0
_last_checkpoint = [0.0]


async def checkpoint_wal() -> None:
    """Copy SQLite's WAL back into the database (PASSIVE: it waits for no reader or writer),
    at most once every ``CHECKPOINT_EVERY_SECONDS`` per process. Run after a report batch's
    reply has gone (a background task), so no reply waits for it; nothing on PostgreSQL.
    Async: whether one is due is decided on the event loop, and only a due checkpoint goes to
    the thread pool (a trip there after every batch was ~5 % of a one-step request's CPU)."""
    engine = get_engine()
    now = time.monotonic()
    if engine.dialect.name != "sqlite" or now - _last_checkpoint[0] < CHECKPOINT_EVERY_SECONDS:
        return
    _last_checkpoint[0] = now
    await anyio.to_thread.run_sync(_checkpoint, engine)


def _checkpoint(engine: Engine) -> None:
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
    except SQLAlchemyError as exc:  # the next one, or the autocheckpoint, will do it
        logging.getLogger("grpodeck.db").warning("WAL checkpoint failed: %s", exc)


def private_database_file(path: Path) -> None:
    """Make the SQLite file (and its -wal/-shm, which SQLite creates with the file's own mode)
    readable by this user only: it holds password hashes, run tokens and alert URLs, and other
    local accounts or a sandboxed program must not read it. A new folder is 0700 as well, and
    so is the data home (``var/``) when it already existed (``private_folder``)."""
    private_folder(path.parent)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists():
            file.chmod(0o600)


# SQLite connections are a file handle and a page cache, so the pool is never what a request
# waits for: every thread of the request pool (40) can hold one while waiting for the write
# lock, plus a second for the few paths that open their own session (the auth middleware, a
# page's process banner). SQLAlchemy's default (5 + 10) made readers wait 30 s for a connection
# behind writers waiting for the lock, then fail with a 500 (``QueuePool limit``).
SQLITE_POOL_SIZE = 10
SQLITE_MAX_OVERFLOW = 90


def _in_memory(path: str) -> bool:
    return not path or path == ":memory:" or "mode=memory" in path


def make_engine(url: str, lock_timeout_s: float | None = None) -> Engine:
    """``lock_timeout_s``: how long a statement waits for another transaction's lock before it
    fails (answered 503 + Retry-After, ``app.core.busy``): SQLite's busy timeout, PostgreSQL's
    ``lock_timeout``. None (migrations): SQLite waits 10 s, PostgreSQL as long as it takes."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1].split("?", 1)[0] if "///" in url else ""
        if path and path != ":memory:" and not path.startswith("file:"):
            private_database_file(Path(path))
        pool: dict[str, Any] = ({} if _in_memory(path) else
                                {"pool_size": SQLITE_POOL_SIZE, "max_overflow": SQLITE_MAX_OVERFLOW})
        engine = create_engine(url, connect_args={"check_same_thread": False,
                                                  "factory": _SerialWriterConnection}, **pool)
        busy_ms = int(1000 * (lock_timeout_s or DEFAULT_LOCK_TIMEOUT_S))
        event.listen(engine, "connect", partial(_sqlite_pragmas, busy_ms=busy_ms))
        return engine
    settings = get_settings()
    connect_args = ({"options": f"-c lock_timeout={int(lock_timeout_s * 1000)}"}
                    if lock_timeout_s else {})
    return create_engine(url, pool_pre_ping=True, pool_size=settings.database_pool_size,
                         max_overflow=settings.database_max_overflow, connect_args=connect_args)


@lru_cache
def get_engine() -> Engine:
    settings = get_settings()
    return make_engine(settings.database_url, settings.database_lock_timeout_seconds)


@lru_cache
def get_sessionmaker() -> sessionmaker[Session]:
    return sessionmaker(get_engine(), expire_on_commit=False)


async def get_db() -> AsyncIterator[Session]:
    """One session per request; the route (or the service it calls) decides when to commit.

    Async, though the routes that use it are sync: a sync generator dependency costs two trips
    to the request thread pool (open, then close) besides the route's own, ~15 % of a report
    request's CPU (py-spy, one step per request). Making a session does no I/O, and neither does
    closing one whose transaction already ended (a committed write, or nothing read); closing
    one still in a transaction rolls it back on the database, so that goes to a worker thread
    as before and the event loop never waits on the database: shielded from cancellation and
    outside the request pool's limit, as FastAPI closes a sync dependency (a close queued
    behind 40 routes that wait for this very connection would never come)."""
    session = get_sessionmaker()()
    try:
        yield session
    finally:
        if session.in_transaction():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(session.close, limiter=anyio.CapacityLimiter(1))
        else:
            session.close()


SessionDep = Annotated[Session, Depends(get_db)]


def migrate() -> None:
    """Bring the database schema to the latest Alembic revision (every entry point that opens
    the database for writing runs this first: serve, up, user create)."""
    from alembic import command
    from alembic.config import Config

    config = Config(str(data_path("alembic.ini")))
    # explicit, so a wheel's copy (app/_data) never depends on the ini's %(here)s
    config.set_main_option("script_location", str(data_path("migrations")))
    command.upgrade(config, "head")
