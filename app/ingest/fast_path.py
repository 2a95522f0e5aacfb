"""Well-formed report requests go straight to their work, around the framework.

Why: with one logged step per request (TRL's ``report_to="mlflow"``, a plain loop without the
Sender) the request's fixed cost is most of its cost. Of a one-step ``POST
/api/runs/{id}/metrics`` the route's own work (token, run lock, inbox row, commit) was ~15 % of
the web process's samples; FastAPI's routing and dependency solving and the way in and out
through eight middlewares took most of the rest (py-spy, bench/ingest.py). A report route needs
none of them: it has no login page, no cookie, and its reply is small.

This module is the mechanism; ``create_app`` names the routes it serves, each with its own work
(a ``FastRoute``: the report API's metric batch, ``app.ingest.report_api``; MLflow's
``runs/log-batch``, ``app.mlflow.api``), the same function its regular route calls, on one trip
to the request thread pool. What it keeps: the endpoint's body limit (``app.core.limits``),
the cross-origin check for a route that takes no token (``app.security.csrf``: in development
mode the MLflow API asks for no credentials), the security headers, the 503 with
``Retry-After`` on a lock wait, and the WAL checkpoint after the reply. Anything else (a body over the limit or without a
declared length, a body the work refuses to read, a refused caller, a run that is not running,
an unexpected error) is handed, body and all, to the regular app, which answers it exactly as
it always has: the transaction was rolled back, so nothing was half-stored, and errors keep one
shape.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import anyio.to_thread
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.busy import BUSY_DETAIL, RETRY_AFTER_SECONDS, is_lock_wait
from app.core.config import get_settings
from app.core.db import checkpoint_wal, get_sessionmaker
from app.core.limits import Limits
from app.security.csrf import refusal
from app.security.headers import HEADERS

log = logging.getLogger(__name__)

BUSY_JSON = json.dumps({"detail": BUSY_DETAIL}).encode()
SECURITY_HEADERS = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]


class Handover(Enum):
    """What the fast path leaves to the regular app, or answers itself."""

    REGULAR = "regular"  # the regular app answers (an error of any kind, in its usual shape)
    BUSY = "busy"  # a lock wait: 503 + Retry-After, as app.core.busy answers it


# (the path's match, the request's scope and headers, its body, a session) -> the 200 reply's
# JSON, or a Handover. Runs on a worker thread.
Work = Callable[[re.Match[str], Scope, Headers, bytes, Session], bytes | Handover]


@dataclass(frozen=True)
class FastRoute:
    """A ``POST`` route the fast path serves. ``refused``: the exceptions by which its work
    refuses a request (a body it cannot read, a caller or run it will not take): the regular
    app answers those. ``check_origin``: the regular app refuses it cross-origin (a route
    without a token of its own), so the fast path hands such a request over rather than serve
    it."""

    path: re.Pattern[str]
    work: Work
    refused: tuple[type[Exception], ...]
    check_origin: bool = False


def store(route: FastRoute, match: re.Match[str], scope: Scope, headers: Headers,
          body: bytes) -> bytes | Handover:
    """The route's work on a worker thread (one trip, as the regular route's own), with a
    session closed afterwards (the work ended its transaction, or closing rolls it back): a
    refusal goes the regular way, a lock wait is BUSY, any other error goes the regular way,
    which answers it in its usual shape (the fast path stands in front of FastAPI's error
    middleware, ``app.main.DeckApp``)."""
    try:
        with get_sessionmaker()() as session:
            return route.work(match, scope, headers, body, session)
    except route.refused:
        return Handover.REGULAR
    except DBAPIError as exc:
        return Handover.BUSY if is_lock_wait(exc) else Handover.REGULAR
    except Exception:
        log.exception("fast path: POST %s failed; the regular app answers it", scope["path"])
        return Handover.REGULAR


class FastPath:
    """ASGI middleware: the front door of ``app.main.DeckApp``, behind only the
    forwarded-headers check, in front of FastAPI's entrance and every middleware."""

    def __init__(self, app: ASGIApp, routes: Sequence[FastRoute]) -> None:
        self.app = app
        self.routes = tuple(routes)
        settings = get_settings()
        self.limits = Limits.of(settings)
        self.trusted = settings.trusted_origins

    def _route(self, scope: Scope) -> tuple[FastRoute, re.Match[str]] | None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        for route in self.routes:
            if match := route.path.match(scope["path"]):
                return route, match
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._route(scope)
        headers = Headers(scope=scope) if found else None
        if found is None or headers is None or not self._servable(scope, found[0], headers):
            await self.app(scope, receive, send)  # limits, chunked bodies, origins, other routes
            return
        body = await read_body(receive)
        if body is None:  # the client went away
            return
        outcome = await anyio.to_thread.run_sync(store, found[0], found[1], scope, headers,
                                                 body)
        if outcome is Handover.REGULAR:
            await self.app(scope, replay(body, receive), send)
            return
        if outcome is Handover.BUSY:
            log.warning("database busy on POST %s", scope["path"])
            await answer(send, 503, BUSY_JSON,
                         [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
            return
        await answer(send, 200, outcome)
        await checkpoint_wal()  # after the reply, as the regular routes' background task

    def _servable(self, scope: Scope, route: FastRoute, headers: Headers) -> bool:
        """A body of declared length within the endpoint's limit, from a caller the regular
        app would let through its cross-origin check."""
        declared = headers.get("content-length", "")
        if not declared.isdigit() or int(declared) > self.limits.for_path(scope["path"]):
            return False
        return not (route.check_origin and refusal("POST", headers, self.trusted))


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
