"""A database lock wait is "busy, come back", never a server error: 503 with ``Retry-After``.

Another process can hold the database's write lock for longer than a request waits for it (a
backup, a ``sqlite3`` shell with ``BEGIN EXCLUSIVE``, a long migration or ``LOCK TABLE`` on
PostgreSQL). SQLite then raises "database is locked" after its busy timeout and PostgreSQL
raises a lock timeout, a serialization failure or a deadlock; before this handler each became a
500, which a reporter following the plain-HTTP protocol treated as a lost batch. A 503 with
``Retry-After`` tells every client (the Sender, the worker, curl scripts) to send the same rows
again later; the transaction was rolled back, so nothing was half-stored.
"""

from __future__ import annotations

import logging
import sqlite3

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError

from app.core.error_pages import error_page, server_error, wants_html

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
# PostgreSQL SQLSTATEs of waiting on someone else's lock: lock_not_available (lock_timeout,
# NOWAIT), serialization_failure, deadlock_detected.
PG_LOCK_STATES = {"55P03", "40001", "40P01"}
SQLITE_LOCK_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
BUSY_DETAIL = (f"the database is busy (another transaction holds its lock); nothing was stored, "
               f"send the same request again in {RETRY_AFTER_SECONDS} s")


def is_lock_wait(exc: BaseException) -> bool:
    """True for the DB errors that mean "another transaction holds the lock", of either
    database; every other DB error stays a 500 (a bug, a full disk, a broken schema)."""
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.OperationalError):
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None:
            return code & 0xFF in SQLITE_LOCK_CODES
        return "locked" in str(orig)
    return getattr(orig, "sqlstate", None) in PG_LOCK_STATES


async def db_error(request: Request, exc: Exception) -> Response:
    """503 + Retry-After for a lock wait; any other database error goes on to the 500 page."""
    if not is_lock_wait(exc):
        return await server_error(request, exc)
    log.warning("database busy on %s %s: %s", request.method, request.url.path,
                getattr(exc, "orig", exc))
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if wants_html(request):
        return error_page(request, 503, BUSY_DETAIL, headers)
    return JSONResponse({"detail": BUSY_DETAIL}, status_code=503, headers=headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(DBAPIError, db_error)
