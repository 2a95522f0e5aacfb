"""Hands a stored run to the Celery queue. The web app never imports the training stack."""

from __future__ import annotations

from app.core.config import get_settings
from app.runs.models import Run


def enqueue(run: Run, ticket: str) -> str:
    """Send the run to the worker queue; returns the Celery task id. The message carries a
    single-use claim ticket, never the run's token."""
    from worker.celery_app import celery_for

    settings = get_settings()
    result = celery_for(settings.broker_url, settings.queue).send_task(
        "grpodeck.train_run",
        kwargs={"run_id": run.id, "spec": run.spec, "report_url": settings.public_url,
                "ticket": ticket},
        queue=settings.queue,
    )
    return result.id
