"""Send a dry run to the worker queue by task name: the web app never imports the worker (or
the training stack); it sends with the same client as runs (``app.core.broker``)."""

from __future__ import annotations

from typing import Any

from app.core.broker import sender
from app.core.config import get_settings

TASK = "grpodeck.dry_run"


def send(dry_run_id: int, spec: dict[str, Any], ticket: str, prompts: int) -> str:
    """Queue the dry run; returns the Celery task id. The message carries a single-use ticket
    that only lets the worker post this dry run's result."""
    settings = get_settings()
    result = sender(settings.broker_url, settings.queue).send_task(
        TASK, kwargs={"dry_run_id": dry_run_id, "spec": spec, "prompts": prompts,
                      "report_url": settings.worker_report_url, "ticket": ticket},
        queue=settings.queue)
    return result.id
