"""A well-formed metric batch goes straight to its work, around the framework.

Why: with one logged step per request (TRL's ``report_to="mlflow"``, a plain loop without the
Sender) the request's fixed cost is most of its cost. Of a one-step ``POST
/api/runs/{id}/metrics`` the route's own work (token, run lock, inbox row, commit) was ~15 % of
the web process's samples; FastAPI's routing and dependency solving and the way in and out
through eight middlewares took most of the rest (py-spy, bench/ingest.py). The report route
needs none of them: it has no login, no origin check, no page, and its reply is small.

What it keeps: the same work (``report_api.ingest_batch``, one trip to the request thread
pool, as the route takes), the ingest body limit, the security headers, the 503 with
``Retry-After`` on a lock wait, and the WAL checkpoint after the reply. Anything else (a body
over the limit or without a declared length, JSON that pydantic's parser refuses, a refused
token, a run that is not running, an unexpected error) is handed, body and all, to the regular
app, which answers it exactly as it always has: the transaction was rolled back, so nothing
was half-stored, and errors keep one shape.
"""

from __future__ import annotations

import json
import logging
import re
from enum import Enum

import anyio.to_thread
from fastapi import HTTPException
from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.busy import BUSY_DETAIL, RETRY_AFTER_SECONDS, is_lock_wait
from app.core.config import get_settings
from app.core.db import checkpoint_wal, get_sessionmaker
from app.core.limits import Limits
from app.ingest.report_api import ingest_batch
from app.security.headers import HEADERS
from grpodeck.contract.wire import IngestReply, MetricBatch

log = logging.getLogger(__name__)

METRICS_PATH = re.compile(r"^/api/runs/(\d{1,18})/metrics$")
BUSY_JSON = json.dumps({"detail": BUSY_DETAIL}).encode()
SECURITY_HEADERS = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]


class Handover(Enum):
    """What the fast path leaves to the regular app, or answers itself."""

    REGULAR = "regular"  # the regular app answers (an error of any kind, in its usual shape)
    BUSY = "busy"  # a lock wait: 503 + Retry-After, as app.core.busy answers it


def store(run_id: int, authorization: str | None, body: bytes) -> IngestReply | Handover:
    """Parse and store one batch on a worker thread (one trip, as the route's own)."""
    try:
        batch = MetricBatch.model_validate_json(body)
    except ValidationError:
        return Handover.REGULAR
    session = get_sessionmaker()()
    try:
        return ingest_batch(session, run_id, authorization, batch)
    except HTTPException:
        return Handover.REGULAR
    except DBAPIError as exc:
        return Handover.BUSY if is_lock_wait(exc) else Handover.REGULAR
    finally:
        session.close()  # its transaction ended with ingest_batch's commit or rollback


class ReportFastPath:
    """ASGI middleware, outside every other one but the forwarded-headers one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.limit = Limits.of(get_settings()).ingest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = (METRICS_PATH.match(scope["path"])
                 if scope["type"] == "http" and scope["method"] == "POST" else None)
        headers = Headers(scope=scope) if match else None
        declared = headers.get("content-length", "") if headers else ""
        if not match or not declared.isdigit() or int(declared) > self.limit:
            await self.app(scope, receive, send)  # the limit's 413, chunked bodies, other routes
            return
        body = await read_body(receive)
        if body is None:  # the client went away
            return
        authorization = headers.get("authorization") if headers else None
        outcome = await anyio.to_thread.run_sync(store, int(match.group(1)), authorization, body)
        if outcome is Handover.REGULAR:
            await self.app(scope, replay(body, receive), send)
            return
        if outcome is Handover.BUSY:
            log.warning("database busy on POST %s", scope["path"])
            await answer(send, 503, BUSY_JSON,
                         [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
            return
        await answer(send, 200, outcome.model_dump_json().encode())
        await checkpoint_wal()  # after the reply, as the route's background task


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body (its declared length is within the limit), or None when the
    client disconnected first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body to the regular app, then goes on with
    the connection's own (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> Message:
        return pending.pop() if pending else await receive()

    return again


async def answer(send: Send, status: int, body: bytes,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            *SECURITY_HEADERS, *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
