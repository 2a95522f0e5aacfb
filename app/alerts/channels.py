"""Send one message to one destination: Apprise for every channel (json://, mailto://, slack://,
ntfy://, ...), httpx for the plain JSON webhook (``webhook+https://``). Returns the failure
reason instead of raising, so the sender can record it."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from app.alerts import egress
from grpodeck.contract.alerts import WEBHOOK_PREFIX

log = logging.getLogger(__name__)

NOTIFY_TYPES = {"critical": "failure", "warning": "warning", "resolved": "success",
                "info": "info"}


def with_timeouts(url: str, seconds: float) -> str:
    """Apprise's own connect/read timeouts (``cto``/``rto``) unless the URL sets them."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    for key in ("cto", "rto"):
        query.setdefault(key, f"{seconds:g}")
    return urlunsplit(parts._replace(query=urlencode(query)))


def send_webhook(url: str, payload: dict[str, Any], timeout: float) -> str | None:
    try:
        response = httpx.post(url[len(WEBHOOK_PREFIX):], json=payload, timeout=timeout)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"[:500] or type(exc).__name__
    if response.status_code >= 300:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return None


def send_apprise(url: str, payload: dict[str, Any], timeout: float) -> str | None:
    import apprise

    notifier = apprise.Apprise()
    if not notifier.add(with_timeouts(url, timeout)):
        return "not a valid Apprise URL"
    result = notifier.notify(body=payload["text"], title=payload["title"],
                             notify_type=NOTIFY_TYPES.get(payload.get("severity", ""), "info"))
    if result:
        return None
    problems = [e.message for e in result.logs() if e.level in ("WARNING", "ERROR")]
    return ("; ".join(problems) or "the notification service reported a failure")[:500]


def send(url: str, payload: dict[str, Any], timeout: float) -> str | None:
    """None when delivered, else why not. The outbound URL policy is checked again now (the
    URL may come from ``GRPODECK_ALERT_URLS`` or predate the policy) and guards every
    connection the delivery makes (redirects, DNS rebinding): ``app.alerts.egress``."""
    try:
        if (refused := egress.destination_refusal(url)) is not None:
            return refused[:500]
        with egress.guard():
            if url.startswith(WEBHOOK_PREFIX):
                return send_webhook(url, payload, timeout)
            return send_apprise(url, payload, timeout)
    except Exception as exc:  # a plugin bug must not kill the sender
        log.exception("delivery failed")
        return f"{type(exc).__name__}: {exc}"[:500]
