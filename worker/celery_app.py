"""The Celery app, configured from the same settings as the web app.

acks_late + prefetch 1: a worker holds one run at a time and a crashed worker's run is not
silently lost from the queue. Results are not stored: outcomes travel over the HTTP report API.
"""

from __future__ import annotations

from celery import Celery

from app.core.config import get_settings

settings = get_settings()
if settings.broker_url.startswith("sqla+sqlite"):
    from pathlib import Path

    Path(settings.broker_url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)

celery_app = Celery("grpodeck", broker=settings.broker_url, include=["worker.tasks"])
celery_app.conf.update(
    task_default_queue=settings.queue,
    task_acks_late=True,
    task_reject_on_worker_lost=False,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    task_serializer="json",
    accept_content=["json"],
    broker_connection_retry_on_startup=True,
    broker_transport_options={"polling_interval": 0.5},
    worker_hijack_root_logger=False,
)
