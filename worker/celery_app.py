"""The worker's Celery app, configured from the worker's settings (same environment as the web).

acks_late + prefetch 1: a worker holds one run at a time and a crashed worker's run is not
silently lost from the queue: ``task_reject_on_worker_lost`` requeues the message when a pool
process dies, and on Redis an unacknowledged message of a dead worker comes back after
``broker_visibility_seconds``. A redelivery is always safe: the message holds a single-use claim
ticket, so a run that was already claimed is not trained twice (its claim answers 409), and a run
that never started is trained by whoever claims it. Results are not stored: outcomes travel over
the HTTP report API.

Concurrency: one pool process per device slot (``worker.slots``), else one; ``grpodeck worker
--concurrency N`` still overrides it.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery
from celery.signals import worker_init

from grpodeck.contract.tasks import embedded_broker_lock, private_broker_file
from worker.identity import worker_name
from worker.settings import get_settings
from worker.slots import SlotConfigError, worker_slots


def make_celery(broker_url: str, queue: str, visibility_seconds: float = 600.0,
                concurrency: int = 1) -> Celery:
    options: dict[str, float] = {}
    private_broker_file(broker_url)
    if broker_url.startswith(("redis", "rediss")):
        options["visibility_timeout"] = visibility_seconds
    app = Celery("grpodeck", broker=broker_url,
                 include=["worker.tasks", "worker.dry_run", "worker.capabilities"])
    app.conf.update(
        task_default_queue=queue,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        broker_transport_options=options,
        worker_prefetch_multiplier=1,
        worker_concurrency=concurrency,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    return app


@lru_cache
def celery_for(broker_url: str, queue: str) -> Celery:
    """One app per broker (tests may switch brokers)."""
    return make_celery(broker_url, queue, get_settings().broker_visibility_seconds,
                       slot_concurrency())


def slot_concurrency() -> int:
    """One pool process per device slot; a bad slot setting stops the worker at start with
    the setting's name and what is wrong (not a traceback at the first run)."""
    try:
        slots = worker_slots()
    except SlotConfigError as exc:
        raise SystemExit(f"grpodeck worker: {exc}") from None
    return len(slots) if slots else 1


celery_app = celery_for(get_settings().broker_url, get_settings().queue)


@worker_init.connect
def _declare_queue(sender: object = None, **_: object) -> None:
    """Before the consumer starts: the queue declared once under the embedded broker's lock,
    so a run sent while this worker starts cannot race it (``embedded_broker_lock``)."""
    settings = get_settings()
    worker_name()  # taken before the pool forks, so its processes share the name's lock
    with embedded_broker_lock(settings.broker_url), \
            celery_app.connection_for_write() as connection:
        connection.default_channel.queue_declare(queue=settings.queue)

# Connects the heartbeat (worker_ready) and the pool processes' death with the worker
# (worker_process_init) before the pool forks, and the bound on a shutdown's length
# (worker_shutting_down).
from worker import heartbeat, shutdown  # noqa: F401
