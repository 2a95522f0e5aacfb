"""Hands a stored run to the Celery queue, by task name: the web app never imports the worker.

The task's name, its arguments and the broker defaults are the contract's
(``grpodeck.contract.tasks``); the worker registers its task under the same name.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery

from app.core.config import get_settings
from app.runs.models import Run
from grpodeck.contract.tasks import (
    TRAIN_RUN,
    TrainRunKwargs,
    embedded_broker_lock,
    private_broker_file,
)


@lru_cache
def sender(broker_url: str, queue: str) -> Celery:
    """One sending app per broker (tests may switch brokers); it runs no tasks."""
    private_broker_file(broker_url)
    app = Celery("grpodeck-web", broker=broker_url)
    app.conf.update(task_default_queue=queue, task_serializer="json", accept_content=["json"],
                    task_ignore_result=True, broker_connection_retry_on_startup=True)
    with embedded_broker_lock(broker_url), app.connection_for_write() as connection:
        connection.default_channel.queue_declare(queue=queue)  # see embedded_broker_lock
    return app


def enqueue(run: Run, ticket: str) -> str:
    """Send the run to the worker queue; returns the Celery task id. The message carries a
    single-use claim ticket, never the run's token."""
    settings = get_settings()
    kwargs = TrainRunKwargs(run_id=run.id, spec=run.spec, report_url=settings.worker_report_url,
                            ticket=ticket)
    result = sender(settings.broker_url, settings.queue).send_task(
        TRAIN_RUN, kwargs=dict(kwargs), queue=settings.queue)
    return result.id
