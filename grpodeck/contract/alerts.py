"""A run's alert rules (part of its spec) and the checks on their destinations.

Destinations are Apprise URLs (``json://``, ``mailto://``, ``slack://``, ``ntfy://`` ... one
library for every channel), or ``webhook+http(s)://`` for the plain JSON payload documented in
the README. Apprise is imported only when a non-webhook URL is checked.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SEVERITIES = ("info", "warning", "critical")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def severity_rank(severity: str) -> int:
    """Order of severities: info < warning < critical."""
    return _RANK[severity]


WEBHOOK_PREFIX = "webhook+"
MAX_URLS = 10
MAX_URL_LENGTH = 2000


def check_url(url: str) -> str | None:
    """None when ``url`` is a destination we can send to, else why not."""
    if len(url) > MAX_URL_LENGTH:
        return f"destination longer than {MAX_URL_LENGTH} characters"
    if url.startswith(WEBHOOK_PREFIX):
        rest = url[len(WEBHOOK_PREFIX):]
        if not re.match(r"^https?://[^/\s]+", rest):
            return "a webhook destination looks like webhook+https://host/path"
        return None
    import apprise  # lazily: the worker validates specs too and never sends

    if not apprise.Apprise().add(url):
        return (f"{privacy(url)!r} is not an Apprise URL (e.g. json://host/path, "
                "mailto://user:pass@host, slack://...) nor webhook+https://host/path")
    return None


def privacy(url: str) -> str:
    """The URL with passwords/tokens hidden, for pages and logs."""
    if url.startswith(WEBHOOK_PREFIX):
        return re.sub(r"//[^@/]*@", "//***@", url.split("?", 1)[0])
    import apprise

    a = apprise.Apprise()
    return a[0].url(privacy=True) if a.add(url) else re.sub(r"//[^@/]*@", "//***@", url)[:60]


class AlertRules(BaseModel):
    """A run's own alert rules (part of the run spec)."""

    model_config = ConfigDict(extra="forbid")

    urls: list[str] = Field(default_factory=list, max_length=MAX_URLS,
                            description="extra destinations for this run (Apprise URLs or "
                            "webhook+https://...)")
    min_severity: Literal["info", "warning", "critical"] = Field(
        "warning", description="open an alert when a finding reaches this severity")
    ignore: list[str] = Field(default_factory=list, max_length=50,
                              description="finding categories never alerted for this run")

    @field_validator("urls")
    @classmethod
    def _valid_urls(cls, urls: list[str]) -> list[str]:
        cleaned = [u.strip() for u in urls if u and u.strip()]
        for url in cleaned:
            problem = check_url(url)
            if problem:
                raise ValueError(problem)
        return cleaned

    @field_validator("ignore")
    @classmethod
    def _categories(cls, values: list[str]) -> list[str]:
        cleaned = [v.strip() for v in values if v and v.strip()]
        for v in cleaned:
            if not re.fullmatch(r"[a-z_]{1,40}", v):
                raise ValueError(f"{v[:40]!r} is not a finding category (e.g. reward_hacking)")
        return cleaned

    def cares(self, category: str, severity: str | None) -> bool:
        """True when a finding of this category at this severity is alert-worthy."""
        if severity is None or category in self.ignore or severity not in SEVERITIES:
            return False
        return severity_rank(severity) >= severity_rank(self.min_severity)
