"""Send a dry run to the worker queue by task name: the web app never imports the worker (or
the training stack), it only needs a Celery client for the same broker and queue."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from celery import Celery

from app.core.config import get_settings

TASK = "grpodeck.dry_run"


@lru_cache
def _client(broker_url: str) -> Celery:
    client = Celery("grpodeck-web", broker=broker_url)
    client.conf.update(task_serializer="json", accept_content=["json"],
                       broker_connection_retry_on_startup=True)
    return client


def send(dry_run_id: int, spec: dict[str, Any], ticket: str, prompts: int) -> str:
    """Queue the dry run; returns the Celery task id. The message carries a single-use ticket
    that only lets the worker post this dry run's result."""
    settings = get_settings()
    result = _client(settings.broker_url).send_task(
        TASK, kwargs={"dry_run_id": dry_run_id, "spec": spec, "prompts": prompts,
                      "report_url": settings.worker_report_url, "ticket": ticket},
        queue=settings.queue)
    return result.id
