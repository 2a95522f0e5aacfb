"""The training child dies with its supervisor (the Celery pool process that started it).

The child runs in its own session so its whole group can be killed on cancel, which also means
nothing takes it down when the worker is ``kill -9``-ed: it would train to the end with no one to
report its end (and on a GPU, hold the device). Two independent mechanisms, Linux first:

- ``prctl(PR_SET_PDEATHSIG, SIGHUP)``: the kernel signals us the moment our parent dies;
- a daemon thread that polls ``getppid()`` every second, for when the signal cannot be set or its
  handler cannot run (the main thread inside a long native call).

Either way the child first says its last words (a bounded callback: the training child sends
the rows of its spool the server has not acknowledged, so a worker kill loses no logged step),
then kills its whole process group (data-loader or sandbox grandchildren too).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1

_last_words: Callable[[], None] | None = None
_dying = threading.Lock()


def _die(*_: object) -> None:
    """Say the last words once, then kill our group if we lead it (we do when started by the
    worker), else just ourselves."""
    if not _dying.acquire(blocking=False):
        return  # the signal handler and the poll thread both noticed: one of them is on it
    sys.stderr.write("supervisor gone: the training process group exits\n")
    sys.stderr.flush()
    if _last_words is not None:
        try:
            _last_words()
        except Exception as exc:  # noqa: BLE001 - dying anyway; say why the words were lost
            sys.stderr.write(f"last words failed: {exc}\n")
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def set_pdeathsig(sig: int) -> bool:
    """Ask the kernel for ``sig`` when our parent dies (Linux); False where unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int, poll_seconds: float) -> None:
    while True:
        if os.getppid() != parent_pid:
            _die()
        time.sleep(poll_seconds)


def tie_to_parent(parent_pid: int, poll_seconds: float = 1.0,
                  last_words: Callable[[], None] | None = None) -> None:
    """Exit (with our group) as soon as ``parent_pid`` is no longer our parent, after calling
    ``last_words`` (it must bound its own time)."""
    global _last_words
    _last_words = last_words
    signal.signal(signal.SIGHUP, _die)
    if not _set_pdeathsig(signal.SIGHUP):
        log.warning("PR_SET_PDEATHSIG unavailable; relying on the parent poll")
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        _die()
    threading.Thread(target=_watch, args=(parent_pid, poll_seconds), daemon=True,
                     name="lifeline").start()


_set_pdeathsig = set_pdeathsig  # the name tests replace to simulate its absence
