"""The web side's one Celery client: it sends tasks (runs, dry runs) and broadcasts to workers
by name, and never runs a task, so the web app never imports the worker.

Why one, declared under a lock: kombu's SQLAlchemy transport creates a queue with a
get-or-create that is safe within one process only. A second client for dry runs skipped the
locked declaration, and a dry run sent while a worker started up failed with
"UNIQUE constraint failed: kombu_queue.name" (seen in CI). Every send now goes through the
client that declared its queue under ``embedded_broker_lock``.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery

from grpodeck.contract.tasks import embedded_broker_lock, private_broker_file


@lru_cache
def sender(broker_url: str, queue: str) -> Celery:
    """One sending app per broker and queue (tests may switch brokers); it runs no tasks."""
    private_broker_file(broker_url)
    app = Celery("grpodeck-web", broker=broker_url)
    app.conf.update(task_default_queue=queue, task_serializer="json", accept_content=["json"],
                    task_ignore_result=True, broker_connection_retry_on_startup=True)
    with embedded_broker_lock(broker_url), app.connection_for_write() as connection:
        connection.default_channel.queue_declare(queue=queue)  # see embedded_broker_lock
    return app
