"""Run the training in a child process group and supervise it.

A child of its own gives clean CUDA state and crash isolation, and a process group we can kill
as a whole (the trainer may spawn data-loader or sandbox grandchildren). Cancelling does not rely
on the broker (kombu's SQLite transport delivers no revoke): the trainer learns of a stop from
its ingest replies and stops gracefully; if it has not exited within the grace period, we kill
the group.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*")
# The folders of an absolute path: "/" not after a letter, digit, ".", ":" or "/" (so URLs and
# relative paths stay whole), then one or more names each ended by "/".
ABSOLUTE_DIRS = re.compile(r"(?<![\w.:/~])/(?:[^\s/'\"():,<>]+/)+")


class Child(Protocol):
    """What supervising needs of a child: ``subprocess.Popen``, or a warm start's
    ``worker.training.warm.ForkedChild``."""

    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def kill_group(proc: Child, grace: float) -> None:
    """SIGTERM the child's group, then SIGKILL whatever is left after ``grace`` seconds.

    No default: the caller passes the run's own cancel grace, so a kill comes when promised."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        proc.wait()


def supervise(proc: Child, should_stop: Callable[[], bool],
              poll_seconds: float, grace_seconds: float) -> int:
    """Wait for the child; once a stop is requested give it ``grace_seconds`` to exit."""
    stop_seen_at: float | None = None
    while True:
        try:
            return proc.wait(timeout=poll_seconds)
        except subprocess.TimeoutExpired:
            pass
        if stop_seen_at is None:
            if should_stop():
                stop_seen_at = time.monotonic()
        elif time.monotonic() - stop_seen_at > grace_seconds:
            kill_group(proc, grace_seconds)
            return proc.wait()


def tail(path: Path, max_chars: int = 4000) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - max_chars))
        return fh.read().decode("utf-8", "replace")


def redact_paths(text: str) -> str:
    """``text`` with the folders of every absolute path replaced by ``…/`` (file names and
    line numbers stay: ``…/datasets.py", line 12``). Errors and traceback tails go to the web
    app and every user of it; where this worker keeps its runs, datasets, models, caches and
    Python is none of their business (issue 22)."""
    return ABSOLUTE_DIRS.sub("…/", text)


def error_line(stderr_tail: str) -> str | None:
    """The exception line of a Python traceback, the most useful one-line error for a person."""
    lines = [ln.strip() for ln in stderr_tail.splitlines() if ln.strip()]
    for line in reversed(lines):
        if EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else None
