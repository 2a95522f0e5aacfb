"""The worker's heartbeat, and its pool processes' tie to it.

The Celery main process posts a heartbeat to the web app every ``heartbeat_seconds`` from a
daemon thread started once the worker is ready (``worker_ready``); when the worker dies the
beats stop and the dashboard says no worker is running. Each pool process asks the kernel for
SIGKILL when the main process dies (``worker_process_init``), so a ``kill -9`` of the worker
does not leave a pool process running a task with nobody to report it; that pool process's
training or dry-run child then dies with it (``worker.training.lifeline``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Any

import httpx
from celery.signals import worker_process_init, worker_ready

from grpodeck.contract.heartbeat import Heartbeat
from worker.identity import worker_name
from worker.settings import get_settings
from worker.training.lifeline import set_pdeathsig

log = logging.getLogger(__name__)


def post_heartbeat(client: httpx.Client, heartbeat: Heartbeat, quiet: bool = False) -> bool:
    """One beat; False (logged unless ``quiet``: once per outage is enough) when the web app
    did not take it: the next one may."""
    settings = get_settings()
    headers = {"Authorization": f"Bearer {settings.worker_secret}"} if settings.worker_secret else {}
    try:
        reply = client.post(settings.heartbeat_url, json=heartbeat.model_dump(), headers=headers)
    except httpx.HTTPError as exc:
        if not quiet:
            log.warning("heartbeat to %s failed: %s", settings.heartbeat_url, exc)
        return False
    if reply.status_code >= 400:
        if not quiet:
            log.warning("heartbeat refused (%s): %s", reply.status_code, reply.text[:300])
        return False
    return True


def _beat_forever(heartbeat: Heartbeat, every: float) -> None:
    with httpx.Client(timeout=10) as client:
        delivered = True
        while True:
            if post_heartbeat(client, heartbeat, quiet=not delivered) != delivered:
                delivered = not delivered
                if delivered:
                    log.info("heartbeat delivered again")
            threading.Event().wait(every)


@worker_ready.connect
def start_heartbeat(sender: Any = None, **_: Any) -> None:
    """Named ``<host>-<index>`` (``worker.identity``): the same name across restarts, and
    distinct for two workers on one host."""
    heartbeat = Heartbeat(name=worker_name(), host=socket.gethostname(), pid=os.getpid())
    threading.Thread(target=_beat_forever, args=(heartbeat, get_settings().heartbeat_seconds),
                     daemon=True, name="heartbeat").start()


@worker_process_init.connect
def die_with_worker(**_: Any) -> None:
    if not set_pdeathsig(signal.SIGKILL):
        log.warning("PR_SET_PDEATHSIG unavailable: a pool process may outlive a killed worker")
