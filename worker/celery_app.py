"""The Celery app, configured from the same settings as the web app.

acks_late + prefetch 1: a worker holds one run at a time and a crashed worker's run is not
silently lost from the queue. Results are not stored: outcomes travel over the HTTP report API.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from celery import Celery

from app.core.config import get_settings


def make_celery(broker_url: str, queue: str) -> Celery:
    if broker_url.startswith("sqla+sqlite"):
        Path(broker_url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    app = Celery("grpodeck", broker=broker_url, include=["worker.tasks"])
    app.conf.update(
        task_default_queue=queue,
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    return app


@lru_cache
def celery_for(broker_url: str, queue: str) -> Celery:
    """One app per broker: the web process sends with it, tests may switch brokers."""
    return make_celery(broker_url, queue)


celery_app = celery_for(get_settings().broker_url, get_settings().queue)
