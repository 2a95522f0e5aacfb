"""A stopped worker ends within its grace: SIGTERM (``docker stop``, systemd, ``grpodeck up``,
Ctrl-C) never leaves it running.

Why this is needed: Celery's warm shutdown waits for the running tasks, and a training run takes
hours; when only the main process got the signal (``up`` and ``docker stop`` signal one pid) the
worker ran on. And once the pool was gone, billiard's pool finalizer at interpreter exit joins
its processes with no timeout: a worker from the installed wheel was still alive 17 minutes
after SIGTERM to its process group (issue 33). So when the shutdown starts, each pool process
gets SIGTERM (its task stops its training child within ``cancel_grace_seconds`` and the run
fails as lost, as a killed worker's does; a dry run's message goes back to the queue), and a
watchdog ends the process after ``shutdown_grace_seconds`` whatever still waits: every process
still below it (pool processes, training children in their own sessions) gets SIGKILL, then the
process exits with Celery's exit code.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from celery.signals import worker_shutting_down

from worker.settings import get_settings

log = logging.getLogger(__name__)


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (Linux ``/proc``); empty where it cannot be read."""
    found: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            found[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def descendants(pid: int, depth: int | None = None) -> list[int]:
    """The processes below ``pid``: its children (``depth=1``), or all of them (training and
    dry-run children run in sessions of their own, under the pool processes)."""
    parents = _parents()
    found: list[int] = []
    level, frontier = 0, {pid}
    while frontier and (depth is None or level < depth):
        frontier = {p for p, parent in parents.items() if parent in frontier}
        found += sorted(frontier)
        level += 1
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _end_after(grace: float, exitcode: int) -> None:
    """The watchdog: still here after ``grace`` seconds, end it now."""
    threading.Event().wait(grace)
    log.warning("worker still stopping after %.0f s (shutdown_grace_seconds): ending it", grace)
    _signal(descendants(os.getpid()), signal.SIGKILL)  # a frozen training child too
    logging.shutdown()
    os._exit(exitcode)


@worker_shutting_down.connect
def bound_the_shutdown(sig: str = "", how: str = "", exitcode: int = 0, **_: Any) -> None:
    """Sent in the main process when a warm or cold shutdown starts (SIGTERM, SIGINT,
    SIGQUIT)."""
    grace = get_settings().shutdown_grace_seconds
    log.info("%s shutdown (%s): stopping the running tasks, ending in %.0f s at the latest",
             how, sig, grace)
    _signal(descendants(os.getpid(), depth=1), signal.SIGTERM)  # the pool processes
    threading.Thread(target=_end_after, args=(grace, int(exitcode or 0)), daemon=True,
                     name="shutdown-watchdog").start()
