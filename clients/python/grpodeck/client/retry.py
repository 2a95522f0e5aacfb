"""How long the server asked a client to wait: its ``Retry-After`` header (RFC 9110).

The web app answers 503 + Retry-After while another transaction holds the database's lock and
429 + Retry-After when a client sends too much; both mean "the same request, later". Every
reporter (the Sender, the worker's run client, the dry run's result post) waits what the server
says rather than its own guess, bounded so a wrong header cannot park a reporter for hours.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

# Answers that mean "not now": the server (or a proxy in front of it) is busy or restarting.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
MAX_WAIT_SECONDS = 60.0


def retry_after(response: httpx.Response, now: datetime | None = None) -> float | None:
    """Seconds from the header (a number or an HTTP date), at most MAX_WAIT_SECONDS; None
    when the header is missing or unreadable."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(MAX_WAIT_SECONDS, max(0.0, seconds))
