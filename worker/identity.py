"""This worker's name: ``<host>-<index>``, distinct for every worker running on one host.

Why not Celery's ``celery@<host>``: every worker on a host got the same name, so two of them
wrote one heartbeat row and a dead one hid behind the live one. The index is the first free
``worker-<n>.lock`` in the host-local lock folder (``device_locks_dir``), held with ``flock``
for the worker's life: the kernel frees it when the worker dies (a ``kill -9`` included), so a
restarted worker takes its old name back, and two live ones never share one.
"""

from __future__ import annotations

import fcntl
import socket
from pathlib import Path
from typing import IO

MAX_WORKERS_PER_HOST = 1000
_held: list[tuple[str, IO[bytes]]] = []  # (name, the open lock file), for the process's life


def take_name(lock_dir: Path, host: str | None = None) -> tuple[str, IO[bytes]]:
    """The first free ``<host>-<n>`` (from 1) and the open lock file that holds it; closing
    the file frees the name."""
    host = host or socket.gethostname()
    lock_dir.mkdir(parents=True, exist_ok=True)
    for index in range(1, MAX_WORKERS_PER_HOST + 1):
        fh = (lock_dir / f"worker-{index}.lock").open("ab")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        return f"{host}-{index}", fh
    raise RuntimeError(f"more than {MAX_WORKERS_PER_HOST} workers on {host} hold names in "
                       f"{lock_dir}")


def worker_name() -> str:
    """This process's worker name, taken once (the pool processes inherit the lock with the
    name when the main process took it before forking them)."""
    if not _held:
        from worker.settings import get_settings

        _held.append(take_name(get_settings().device_locks_dir))
    return _held[0][0]
