"""Request body limits per endpoint, enforced before the body is read, with a reason.

A body larger than its endpoint allows is answered 413 before it is read: a declared
Content-Length over the limit is refused at once (the app never runs), and a body without one
(chunked) is counted as it streams in by Starlette's ``RequestBodyLimitMiddleware`` and cut off
at the limit. Without this, a 46 MB ingest body was parsed (blocking the event loop for
seconds) before the token was even checked.

Sizes are settings: ``GRPODECK_MAX_BODY_BYTES`` (JSON API, launch, forms),
``GRPODECK_INGEST_MAX_BODY_BYTES`` (the report API) and ``GRPODECK_UPLOAD_MAX_BODY_BYTES``
(the log import form).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY, RequestBodyLimitMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import Settings, get_settings
from app.core.errors import validation_error_handler

# Endpoints with their own limit; every other request gets the default.
INGEST = re.compile(r"^/api/runs/[^/]+/(metrics|claim|finished)$")  # app.ingest.report_api
UPLOAD = re.compile(r"^/(runs/import|api/imports)$")  # app.imports.views, app.imports.api
ARTIFACTS = re.compile(r"^/api/runs/[^/]+/artifacts$")  # app.artifacts: its own cap
DATASETS = re.compile(r"^/(api/)?datasets$")  # app.datasets: its own size check gives the reason
FORM_OVERHEAD = 64 * 1024  # multipart boundaries and the other fields around an uploaded file


@dataclass(frozen=True)
class Limits:
    default: int
    ingest: int
    upload: int
    datasets: int
    artifacts: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(settings.max_body_bytes, settings.ingest_max_body_bytes,
                   settings.upload_max_body_bytes,
                   settings.dataset_upload_max_bytes + FORM_OVERHEAD,
                   settings.artifact_max_bytes)

    def for_path(self, path: str) -> int:
        if INGEST.match(path):
            return self.ingest
        if UPLOAD.match(path):
            return self.upload
        if ARTIFACTS.match(path):
            return self.artifacts
        if DATASETS.match(path):
            return self.datasets
        return self.default


def human_bytes(n: int) -> str:
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def reason(method: str, path: str, limit: int) -> str:
    return f"request body is larger than {human_bytes(limit)}, the limit of {method} {path}"


class BodyLimit:
    """ASGI middleware: the endpoint's limit, checked on Content-Length first, then counted."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.for_path(scope["path"])
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            body = json.dumps({"detail": reason(scope["method"], scope["path"], limit)}).encode()
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        await RequestBodyLimitMiddleware(self.app, max_body_size=limit)(scope, receive, send)


async def body_too_large(request: Request, exc: Exception) -> JSONResponse:
    """A streamed body that went over the limit: 413 naming the limit. An endpoint's own 413
    (e.g. a dataset upload's size check) keeps its reason."""
    own = getattr(exc, "detail", None)
    if isinstance(own, str) and own != "Content Too Large":
        return JSONResponse(status_code=413, content={"detail": own})
    limit = request.scope.get(MAX_BODY_SIZE_SCOPE_KEY)
    detail = (reason(request.method, request.url.path, limit) if isinstance(limit, int)
              else "request body is too large")
    return JSONResponse(status_code=413, content={"detail": detail})


def install(app: FastAPI, settings: Settings | None = None) -> None:
    """Body limits, and reasons for the 413 of a too-large body and the 422 of an invalid one."""
    app.add_middleware(BodyLimit, limits=Limits.of(settings or get_settings()))
    app.add_exception_handler(413, body_too_large)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
