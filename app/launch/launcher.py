"""Hands a stored run to the Celery queue, by task name: the web app never imports the worker.

The task's name, its arguments and the broker defaults are the contract's
(``grpodeck.contract.tasks``); the worker registers its task under the same name.
"""

from __future__ import annotations

from app.core.broker import sender
from app.core.config import get_settings
from app.runs.models import Run
from grpodeck.contract.tasks import TRAIN_RUN, TrainRunKwargs


def enqueue(run: Run, ticket: str) -> str:
    """Send the run to the worker queue; returns the Celery task id. The message carries a
    single-use claim ticket, never the run's token."""
    settings = get_settings()
    kwargs = TrainRunKwargs(run_id=run.id, spec=run.spec, report_url=settings.worker_report_url,
                            ticket=ticket)
    result = sender(settings.broker_url, settings.queue).send_task(
        TRAIN_RUN, kwargs=dict(kwargs), queue=settings.queue)
    return result.id
