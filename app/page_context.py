"""What every page knows beyond its own data: who is asking, the stale-process banner, and the
words for a run's verdict and a finding's key number. Handed into the shared template
environment (``app.core.templating``) by ``create_app``, so the core stays below the domains
it shows."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates

from app.auth.identity import identity_of
from app.core.db import get_sessionmaker
from app.health.evidence_words import evidence_words
from app.health.headline import key_number
from app.health.stability import label as verdict_label
from app.processes.service import banner_messages

log = logging.getLogger(__name__)


def _identity(request: Request) -> dict[str, Any]:
    """Every page knows who is asking: the top bar, the development-mode banner, which
    buttons to show."""
    return {"identity": identity_of(request)}


def _process_alerts(request: Request) -> dict[str, Any]:
    """The stale-process banner (``app.processes``) on every page a person is allowed to see:
    a dead scheduler or worker is otherwise invisible until an alert never comes."""
    identity = identity_of(request)
    if not (identity.logged_in or identity.dev_mode):
        return {"process_alerts": []}
    if request.headers.get("hx-request") == "true":  # a polled panel has no banner: no query
        return {"process_alerts": []}
    try:
        with get_sessionmaker()() as db:
            return {"process_alerts": banner_messages(db)}
    except Exception:  # an unreadable heartbeat table must not take every page down
        log.exception("process liveness unavailable")
        return {"process_alerts": []}


def verdict_of(run: Any) -> tuple[str, str]:
    """(css key, words) for a run's verdict badge."""
    return verdict_label(run.verdict, live=run.status in ("queued", "running"))


def install(templates: Jinja2Templates) -> None:
    """Set (not append: every ``create_app`` calls it) the context and filters every page uses."""
    templates.context_processors[:] = [_identity, _process_alerts]
    templates.env.filters.update(verdict=verdict_of, evidence_words=evidence_words,
                                 key_number=lambda f: key_number(f.category, f.evidence))
