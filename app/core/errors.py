"""The 422 answer to a request that fails validation: every reason, none of the bulk.

FastAPI's own handler echoes each error's ``input`` back as JSON, which fails (a 500) when the
input holds NaN/Infinity (``allow_nan=False``) or a lone surrogate (not UTF-8), and which sends a
20 MB field straight back to its sender. Here the errors are made JSON-safe first: strings are
cut to a preview, long lists and objects are summarised, non-finite numbers become strings.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

MAX_ECHO_CHARS = 200  # a preview of a bad string: enough to recognise it
MAX_ECHO_ITEMS = 20  # a bigger list or object is summarised, not echoed
MAX_ERRORS = 100  # 10,000 bad rows need not be listed one by one
# Tags of request bodies that are tagged unions (POST /api/runs: a launch spec or an external
# run): pydantic puts the tag into each error's loc, ["body", "launch", "rewards"]; clients
# address the field they sent, ["body", "rewards"], so the tag is left out.
BODY_UNION_TAGS: set[str] = set()


def _loc(loc: Any) -> Any:
    if isinstance(loc, (list, tuple)) and len(loc) > 1 and loc[0] == "body" \
            and loc[1] in BODY_UNION_TAGS:
        return [loc[0], *loc[2:]]
    return loc


def safe_text(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """At most ``limit`` characters, encodable as UTF-8, saying how long the original was."""
    clean = text.encode("utf-8", "replace").decode("utf-8")
    if len(clean) <= limit:
        return clean
    return f"{clean[:limit]}… ({len(text)} characters)"


# tarfile's data filter says where a refused member would land: a path on this server
_LANDS = re.compile(r"would (be extracted to|link to) (?:'[^']*'|\"[^\"]*\"), which is outside "
                    r"the destination")
# the folders TemporaryDirectory makes for one request (an upload unpacked, a log saved)
_TEMP_DIRS = re.compile("(?:" + "|".join(re.escape(d) for d in sorted(
    {tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())}, key=len, reverse=True))
    + r")/tmp[a-z0-9_]{8}(?![^/'\"\s),;])")


def without_server_paths(text: str) -> str:
    """``text`` naming no path of this server, only what the client sent.

    Why: a refusal quoted the exception it caught, and some name server paths: an import
    member refused for traversal said "'../x' would be extracted to '/tmp/tmpab12cd34/x',
    which is outside the destination" (issue 55). Where tarfile's filter says a member would
    land becomes "points (links) outside the archive"; a request's temporary folder, "…"."""
    text = _LANDS.sub(lambda m: ("points" if m.group(1).startswith("be") else "links")
                      + " outside the archive", text)
    return _TEMP_DIRS.sub("…", text)


def json_safe(value: Any, depth: int = 0) -> Any:
    """A small, JSON-serialisable (``allow_nan=False``) rendering of any validation input."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else safe_text(str(value), 40)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, bytes):
        return safe_text(value.decode("utf-8", "replace"))
    if depth >= 3:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        if len(value) > MAX_ECHO_ITEMS:
            return f"<object with {len(value)} keys>"
        return {safe_text(str(k), 100): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if len(value) > MAX_ECHO_ITEMS:
            return f"<array of {len(value)} items>"
        return [json_safe(v, depth + 1) for v in value]
    return safe_text(str(value))


async def validation_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """422 with FastAPI's usual ``{"detail": [{type, loc, msg, input, ctx}]}`` shape."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    detail = [{key: safe_text(value, 1_000) if key == "msg" else json_safe(
                   _loc(value) if key == "loc" else value)
               for key, value in error.items() if key != "url"}
              for error in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        detail.append({"type": "too_many_errors", "loc": [],
                       "msg": f"{len(errors) - MAX_ERRORS} more errors not listed"})
    return JSONResponse(status_code=422, content={"detail": detail})
