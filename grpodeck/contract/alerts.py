"""A run's alert rules (part of its spec) and the checks on their destinations.

Destinations are Apprise URLs (``json://``, ``mailto://``, ``slack://``, ``ntfy://`` ... one
library for every channel), or ``webhook+http(s)://`` for the plain JSON payload documented in
the README. Apprise is imported only when a non-webhook URL is checked.
"""

from __future__ import annotations

import re
from typing import Any, Literal

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
    if url.endswith(MASK):
        return (f"{url[:120]!r} is a masked destination (scheme and host only): type the full "
                "URL again")
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


MASK = "/***"  # what a masked destination ends with: scheme and host shown, the rest kept back


def _host_part(netloc: str) -> str:
    return netloc.rsplit("@", 1)[-1] or "***"


def masked(url: str) -> str:
    """Scheme and host only (``webhook+https://hooks.example/***``): what pages, the API and
    logs show of a destination, to anyone. Paths, tokens and passwords are never echoed."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***"
    if not url.startswith(WEBHOOK_PREFIX):
        try:
            import apprise

            notifier = apprise.Apprise()
            # a hosted service's "host" is a token: take Apprise's own private rendering of it
            rest = notifier[0].url(privacy=True).partition("://")[2] if notifier.add(url) \
                else "***"
        except Exception:  # noqa: BLE001  (a plugin failing to render: show nothing of it)
            rest = "***"
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return f"{scheme[:30]}://{_host_part(netloc)[:100]}{MASK}"


privacy = masked  # the older name


def unmask(urls: list[str], stored: list[str]) -> list[str]:
    """``urls`` as edited, with each masked value left unchanged replaced by the stored URL it
    stands for (the n-th ``x://h/***`` is the n-th stored URL masked that way), so editing a
    list of destinations never needs (nor loses) the secrets it does not show."""
    pool: dict[str, list[str]] = {}
    for url in stored:
        pool.setdefault(masked(url), []).append(url)
    return [pool[u].pop(0) if u.endswith(MASK) and pool.get(u) else u for u in urls]


def masked_spec(spec: dict[str, Any] | None) -> dict[str, Any]:
    """A run spec as shown to people: its own alert destinations masked."""
    spec = dict(spec or {})
    alerts = spec.get("alerts")
    if isinstance(alerts, dict) and alerts.get("urls"):
        spec["alerts"] = {**alerts, "urls": [masked(str(u)) for u in alerts["urls"]]}
    return spec


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
