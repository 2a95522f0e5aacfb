"""Jinja2 templates (autoescaped: model output is untrusted text) and small display filters."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates

from app.core.assets import asset
from app.core.logged_names import logged_names, with_logged
from app.core.resources import data_path


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else (f"{minutes}m {secs:02d}s" if minutes
                                                     else f"{secs}s")


def num(value: float | None) -> str:
    """Four significant digits for a table cell; empty when unknown (never "None")."""
    if value is None:
        return ""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.4g}"


def steps(step: int | None, max_steps: int | None) -> str:
    """"30 / 100", or just "30" when the run has no known length: an outside run that never
    said its max_steps must not read "30 / 0"."""
    step = step or 0
    return f"{step} / {max_steps}" if max_steps else str(step)


def iso(value: datetime | None) -> str:
    """An ISO time with its zone for a browser timer (a naive time from SQLite is UTC)."""
    if value is None:
        return ""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def finite_or_null(value: Any) -> Any:
    """The same structure with NaN/inf floats as None: JSON (and JSON.parse) has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


# What json.dumps(default=str) did with them: str() of dates, dataclasses and subclasses.
_ORJSON_AS_JSON = (orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
                   | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS)


def to_json_attr(value: Any) -> str:
    """JSON for a data- attribute; Jinja's autoescape then makes it safe inside the quotes.

    Chart builders already turn non-finite values into gaps; anything that slips through
    becomes null rather than a page that answers 500."""
    try:  # orjson: a polled chart panel is ~50k numbers, 5-10x faster than json (NaN -> null)
        return orjson.dumps(value, default=str, option=_ORJSON_AS_JSON).decode()
    except orjson.JSONEncodeError:  # e.g. an integer past 64 bits: the standard library's way
        pass
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:
        return json.dumps(finite_or_null(value), separators=(",", ":"), allow_nan=False,
                          default=str)


def beside_logged(name: str, read_as: Mapping[str, str]) -> str:
    """``learning_rate (lr)``: a canonical name with the key(s) the run logged it as
    (``read_as``: key -> name, the run's renames), so the user finds their own name."""
    return with_logged(name, logged_names(read_as))


def with_toast(response: Response, words: str) -> Response:
    """Confirm an htmx action: static/pages.js shows ``words`` in the page's toast."""
    response.headers["HX-Trigger"] = json.dumps({"toast": words})  # ASCII-escaped: a header
    return response


# what every page knows of the domains (who asks, stale processes, verdict words) is handed in
# by ``app.page_context.install``: the shared core knows no domain
templates = Jinja2Templates(directory=str(data_path("templates")))
templates.env.globals["asset"] = asset  # content-hashed static URLs (app/core/assets.py)
templates.env.filters.update(duration=duration, when=when, num=num, iso=iso, json_attr=to_json_attr,
                             steps=steps, beside_logged=beside_logged)
