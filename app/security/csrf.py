"""Cross-site request forgery protection, the way Go 1.25's ``http.CrossOriginProtection``
does it: no tokens, only what browsers already tell the server.

An unsafe request (anything but GET/HEAD/OPTIONS) is refused with 403 when
- ``Sec-Fetch-Site`` is present and is not ``same-origin`` or ``none`` (a user typing the URL), or
- there is no ``Sec-Fetch-Site`` but an ``Origin`` whose host differs from the ``Host`` header
  (older browsers).
Requests with neither header do not come from a browser (curl, httpx, the CLI): they carry no
ambient cookies, so there is nothing to forge, and they pass. ``same-site`` is refused too: a
page on another port of the same host (loopback in development mode) is another origin.
Origins listed in ``GRPODECK_TRUSTED_ORIGINS`` may post (a proxy that rewrites Host).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import get_settings

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}

Route = tuple[frozenset[str], re.Pattern[str]]


def refusal(method: str, headers: Headers, trusted: Iterable[str] = ()) -> str | None:
    """Why this request looks cross-origin, or None when it may proceed."""
    if method in SAFE_METHODS:
        return None
    origin = headers.get("origin")
    if origin is not None and origin.rstrip("/") in {t.rstrip("/") for t in trusted}:
        return None
    site = headers.get("sec-fetch-site")
    if site is not None:
        if site in ("same-origin", "none"):
            return None
        return f"cross-origin request refused (Sec-Fetch-Site: {site})"
    if origin is None:
        return None
    if origin == "null" or urlsplit(origin).netloc.lower() != headers.get("host", "").lower():
        return f"cross-origin request refused (Origin {origin} is not this site)"
    return None


class CrossOriginProtection:
    def __init__(self, app: ASGIApp, exempt: Iterable[Route] = ()) -> None:
        self.app = app
        self.exempt = list(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method, path = scope["method"], scope["path"]
            exempt = any(method in m and p.match(path) for m, p in self.exempt)
            why = None if exempt else refusal(method, Headers(scope=scope),
                                              get_settings().trusted_origins)
            if why is not None:
                await PlainTextResponse(why, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
