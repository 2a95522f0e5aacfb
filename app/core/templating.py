"""Jinja2 templates (autoescaped: model output is untrusted text) and small display filters."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fastapi.templating import Jinja2Templates

from app.core.config import ROOT
from app.health.stability import label as verdict_label


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else (f"{minutes}m {secs:02d}s" if minutes
                                                     else f"{secs}s")


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "—"


def to_json_attr(value: Any) -> str:
    """JSON for a data- attribute; Jinja's autoescape then makes it safe inside the quotes."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)


templates = Jinja2Templates(directory=str(ROOT / "templates"))


def verdict_of(run: Any) -> tuple[str, str]:
    """(css key, words) for a run's verdict badge."""
    return verdict_label(run.verdict, live=run.status in ("queued", "running"))


templates.env.filters.update(duration=duration, when=when, json_attr=to_json_attr,
                             verdict=verdict_of)
