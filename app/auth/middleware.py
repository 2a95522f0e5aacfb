"""Authentication for every request, deny by default (an ASGI middleware, so routes added
later are covered without remembering a dependency).

A request is identified by an API key (``Authorization: Bearer gd_...`` or ``X-API-Key``) or
by the session cookie; the identity goes to ``request.state.auth``. Development mode (login
skipped, said on every page) holds only for a request to a loopback address while no account
exists (``GRPODECK_AUTH=auto``) or always on loopback with ``GRPODECK_AUTH=off``.
Public: static files, ``/healthz``, the login page, and the worker's report endpoints (they
carry their run's own token, checked by ``app.ingest.report_api``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth import service
from app.auth.identity import Identity
from app.auth.local import is_local_request
from app.core.config import get_settings
from app.core.db import get_sessionmaker

SESSION_COOKIE = "grpodeck_session"
PUBLIC_PREFIXES = ("/static/",)
PUBLIC_PATHS = {"/healthz", "/login", "/logout", "/favicon.ico"}

Route = tuple[frozenset[str], re.Pattern[str]]


def _credentials(request: Request) -> tuple[str | None, str | None]:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    key = value.strip() if scheme.lower() == "bearer" else None
    key = key or request.headers.get("x-api-key")
    return key, request.cookies.get(SESSION_COOKIE)


def resolve(request: Request) -> tuple[Identity | None, str]:
    """(identity or None, why not) for one request; runs in a worker thread (database)."""
    return identify(request.scope, *_credentials(request))


def identify(scope: Scope, key: str | None,
             session_id: str | None) -> tuple[Identity | None, str]:
    """(identity or None, why not) for these credentials; development mode as ``resolve``
    says. Routes that take only header credentials (the MLflow-compatible API) call it with
    ``session_id=None``."""
    settings = get_settings()
    with get_sessionmaker()() as db:
        local = is_local_request(scope)
        dev = local and (settings.auth == "off"
                         or (settings.auth == "auto" and not service.any_users(db)))
        user, via, why = None, "none", "log in, or send an API key (Authorization: Bearer gd_...)"
        if key:
            user, via = service.api_key_user(db, key), "api_key"
            why = "unknown or revoked API key"
        elif session_id:
            user, via = service.session_user(db, session_id), "session"
            why = "your session has expired: log in again"
        db.commit()  # last_used_at of an API key
        if user is not None:
            return Identity(user_id=user.id, email=user.email, is_admin=user.is_admin,
                            dev_mode=dev, via=via), ""
    if dev:
        return Identity(dev_mode=True, via="dev"), ""
    return None, why


def _deny(request: Request, why: str) -> Response:
    htmx = request.headers.get("hx-request") == "true"
    wants_page = (request.method in ("GET", "HEAD") and not request.url.path.startswith("/api/")
                  and request.url.path != "/openapi.json" and not htmx)
    if wants_page:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
    headers = {"WWW-Authenticate": "Bearer"}
    if htmx:
        headers["HX-Redirect"] = "/login"
    return JSONResponse({"detail": why}, status_code=401, headers=headers)


class AuthMiddleware:
    def __init__(self, app: ASGIApp, exempt: Iterable[Route] = ()) -> None:
        self.app = app
        self.exempt = list(exempt)

    def _skip(self, method: str, path: str) -> bool:
        return path.startswith(PUBLIC_PREFIXES) or any(
            method in methods and pattern.match(path) for methods, pattern in self.exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._skip(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        identity, why = await anyio.to_thread.run_sync(resolve, request)
        if identity is None and scope["path"] not in PUBLIC_PATHS:
            await _deny(request, why)(scope, receive, send)
            return
        scope.setdefault("state", {})["auth"] = identity
        await self.app(scope, receive, send)
