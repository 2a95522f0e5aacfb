"""Error pages for people: a browser that asks for a page gets HTML in the site's layout;
``/api`` and clients that do not ask for HTML keep FastAPI's JSON ``{"detail": ...}``.

A browser sends ``Accept: text/html`` on navigation; ``fetch``, htmx, curl and the tests'
clients send ``*/*`` or JSON, so they keep getting the machine-readable answer they parse."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.errors import safe_text, validation_error_handler, without_server_paths
from app.core.templating import templates

log = logging.getLogger(__name__)

TITLES = {400: "Bad request", 401: "Log in needed", 403: "Not allowed", 404: "Page not found",
          405: "Method not allowed", 409: "Conflict", 413: "Too large",
          422: "Could not use this request", 500: "Something went wrong on our side",
          503: "Busy, try again shortly"}


def wants_html(request: Request) -> bool:
    """A page request from a browser: not the JSON API, and HTML in the Accept header."""
    if request.url.path.startswith("/api/") or request.url.path == "/api":
        return False
    if request.headers.get("hx-request") == "true":  # htmx swaps nothing on an error anyway
        return False
    return "text/html" in request.headers.get("accept", "")


def error_page(request: Request, status: int, detail: str,
               headers: dict[str, str] | None = None) -> HTMLResponse:
    return templates.TemplateResponse(
        request, "error.html",
        {"status": status, "title": TITLES.get(status, f"Error {status}"), "detail": detail},
        status_code=status, headers=headers)


async def http_error(request: Request, exc: Exception) -> Response:
    """4xx/5xx raised by a view or by routing (unknown path): HTML for a browser."""
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.detail, str):  # a refusal may quote an exception naming a server path
        exc = StarletteHTTPException(exc.status_code, without_server_paths(exc.detail),
                                     getattr(exc, "headers", None))
    if exc.status_code < 400 or not wants_html(request):
        return await http_exception_handler(request, exc)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return error_page(request, exc.status_code, detail, getattr(exc, "headers", None))


async def invalid_request(request: Request, exc: Exception) -> Response:
    """A page address with a bad part (``/runs/abc``, ``?step=x``): the reasons, as a page."""
    if not wants_html(request):
        return await validation_error_handler(request, exc)
    assert isinstance(exc, RequestValidationError)
    reasons = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'request'}: "
                        f"{safe_text(e['msg'], 200)}" for e in exc.errors()[:5])
    return error_page(request, 422, f"This address has a part the page cannot use: {reasons}.")


async def server_error(request: Request, exc: Exception) -> Response:
    """An unexpected exception: logged with its traceback; the person sees no internals."""
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    if wants_html(request):
        return error_page(request, 500, "The server hit an error it did not expect. It was "
                          "logged; try again, and if it keeps happening tell whoever runs it.")
    return JSONResponse({"detail": "internal server error"}, status_code=500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)  # JSON as before for APIs
    app.add_exception_handler(Exception, server_error)
