"""`grpodeck up`'s process supervisor: the web app, a worker and the scheduler as children that
come back when they die.

Without it a ``kill -9`` (or an out-of-memory kill) of the worker left a zombie and every queued
run waited forever; one of the scheduler silently stopped alerts. Each child is restarted after
an exponential backoff (1 s doubling to 30 s, so a child that crashes at start does not spin),
reset once it has stayed up for a stable period; every restart is logged with the exit code or
signal. The supervisor itself starts no threads (``preexec_fn`` stays safe), reaps its children
with ``poll()`` and, on SIGTERM or SIGINT, stops them all before it exits, then calls
``after_stop`` with the processes each child had when the stop began (``up`` ends the runs its
worker was training, issue 55). Its children die with it even when it is ``kill -9``-ed
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("grpodeck.up")

PR_SET_PDEATHSIG = 1  # prctl(2)
STOP_GRACE_SECONDS = 30.0


@dataclass
class Backoff:
    """Delay before restarting a child: ``initial`` doubling per quick death up to ``cap``; a
    child that ran at least ``stable_seconds`` starts again from ``initial``."""

    initial: float = 1.0
    cap: float = 30.0
    factor: float = 2.0
    stable_seconds: float = 60.0
    _next: float = field(default=0.0, init=False)

    def delay(self, ran_seconds: float) -> float:
        """The wait before the next start of a child that died after ``ran_seconds``."""
        if ran_seconds >= self.stable_seconds or self._next == 0.0:
            self._next = self.initial
        current = self._next
        self._next = min(self.cap, current * self.factor)
        return current


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the kernel sends SIGTERM to this child when ``up`` dies, even by SIGKILL, so no
    orphaned worker keeps taking runs for a dashboard that is gone."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def process_tree(pid: int) -> set[int]:
    """``pid`` and every process below it (Linux ``/proc``; only ``pid`` where it cannot be
    read): a worker's pool processes are the ones its runs name."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    found, frontier = {pid}, {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def describe_exit(returncode: int) -> str:
    """'exit code 1' or 'signal SIGKILL': what a person reading the log needs."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class Child:
    """One supervised command and its current process."""

    name: str
    command: list[str]
    backoff: Backoff = field(default_factory=Backoff)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    restarts: int = 0

    def start(self) -> None:
        linux = sys.platform.startswith("linux")
        # preexec_fn is only unsafe once threads exist: the supervisor starts none
        self.proc = subprocess.Popen(self.command,
                                     preexec_fn=_die_with_parent if linux else None)  # noqa: PLW1509
        self.started_at = time.monotonic()
        self.restart_at = None
        log.info("%s started (pid %d)", self.name, self.proc.pid)

    def check(self, now: float) -> None:
        """Reap a dead process and schedule its restart; start it when its backoff is over."""
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.restarts += 1
                self.start()
            return
        if self.proc is None or (code := self.proc.poll()) is None:
            return
        wait = self.backoff.delay(now - self.started_at)
        self.restart_at = now + wait
        log.warning("%s (pid %d) died with %s; restarting in %.0f s (restart %d)", self.name,
                    self.proc.pid, describe_exit(code), wait, self.restarts + 1)

    def tree(self) -> set[int]:
        """The live process and its descendants; empty while it is down."""
        if self.proc is None or self.proc.poll() is not None:
            return set()
        return process_tree(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def wait(self, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) ignored SIGTERM for %.0f s: killed", self.name,
                        self.proc.pid, timeout)
            self.proc.kill()
            self.proc.wait()


AfterStop = Callable[[dict[str, set[int]]], object]


class Supervisor:
    """Start the children, keep them running until SIGTERM/SIGINT, then stop them all and call
    ``after_stop`` with each child's processes as they were when the stop began (by name)."""

    def __init__(self, children: list[Child], poll_seconds: float = 0.2,
                 after_stop: AfterStop | None = None) -> None:
        self.children = children
        self.poll_seconds = poll_seconds
        self.after_stop = after_stop
        self.stopping = False

    def _on_signal(self, signum: int, _frame: object) -> None:
        log.info("%s: stopping every child", signal.Signals(signum).name)
        self.stopping = True

    def run(self, sleep: Callable[[float], None] = time.sleep) -> None:
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for child in self.children:
                child.start()
            while not self.stopping:
                now = time.monotonic()
                for child in self.children:
                    child.check(now)
                sleep(self.poll_seconds)
        finally:
            trees = {child.name: child.tree() for child in self.children}
            self.stop_all()
            self._after_stop(trees)
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _after_stop(self, trees: dict[str, set[int]]) -> None:
        """The hook, once every child has exited; a failure is logged, never raised: the stop
        itself has succeeded."""
        if self.after_stop is None:
            return
        try:
            self.after_stop(trees)
        except Exception:
            log.exception("after stopping the children")

    def stop_all(self) -> None:
        for child in self.children:
            child.stop()
        for child in self.children:
            child.wait(STOP_GRACE_SECONDS)
