"""Who is told about what: per-run rules (from the launch form and the API) and destinations.

Destinations are Apprise URLs (``json://``, ``mailto://``, ``slack://``, ``ntfy://`` ... one
library for every channel), or ``webhook+http(s)://`` for the plain JSON payload documented in
the README. Deployment-wide ones come from ``GRPODECK_ALERT_URLS`` and ``/settings/alerts``;
a run may add its own. The rules model itself is part of the run spec:
``grpodeck.contract.alerts``.
"""

from __future__ import annotations

import hashlib
import re

from grpodeck.contract.alerts import SEVERITIES, AlertRules

# space/newline separated; a comma only separates when a new scheme follows (mailto to=a,b)
_SPLIT = re.compile(r"\s+|,(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)")


def split_urls(text: str | None) -> list[str]:
    return [u.strip() for u in _SPLIT.split(text or "") if u and u.strip()]


def destination_key(url: str) -> str:
    """A stable name for one destination (jobs to it are sent one after another)."""
    return hashlib.sha256(url.encode()).hexdigest()[:32]


def rules_of(spec: dict | None) -> AlertRules:
    """The rules stored with a run (validated at launch, so not re-validated per batch); a run
    launched before alerts existed gets the defaults."""
    data = (spec or {}).get("alerts") or {}
    severity = data.get("min_severity")
    return AlertRules.model_construct(
        urls=[str(u) for u in data.get("urls") or []],
        min_severity=severity if severity in SEVERITIES else "warning",
        ignore=[str(c) for c in data.get("ignore") or []])
