"""Warm starts: the training child forked from a pool process that imported the training stack.

A fresh ``python -m worker.training.child`` spends ~10 s of CPU importing torch, transformers
and TRL before it reads its spec: on every run, on every worker, and a second on the clock
before the first step for a person who just pressed Launch. A Celery pool process runs one
run at a time, forever: it imports that stack once (at its first run) and then forks each
run's child, which starts with everything imported and trains at once.

The forked child is made to look like a fresh process where it matters: its own session (the
supervisor kills its group), its stdout and stderr on the run's log files, the environment the
task built for it (and the Hugging Face offline switches, which those libraries read when
imported, applied to them: ``worker.training.offline``), default signal handlers, no logging
handlers or exit hooks of the pool process, its own random state. It exits with ``os._exit``
after its own exit hooks, never the pool process's. A pool process whose fork is unavailable
(not Linux) or switched off (``GRPODECK_WARM_START=false``) starts a fresh interpreter as before.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import IO

import setproctitle

from worker.settings import get_settings
from worker.training.environment import QUIET_INTEGRATIONS
from worker.training.environment import environment as temporary_environment

log = logging.getLogger(__name__)

# What the training child imports on its way to the first step (``child._train``): importing
# them here is the whole point. Everything heavy hangs off these (torch, transformers, TRL,
# datasets, peft).
TRAINING_STACK = ("worker.training.child", "worker.training.rollouts", "worker.training.models",
                  "worker.training.reporting", "worker.training.config", "worker.rewards.registry",
                  "datasets", "peft")
_preloaded = False


def can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux")


def ready(tick: Callable[[], object], every: float) -> bool:
    """Whether this pool process forks its next child warm (a run's training child, a dry run's
    sampling child): warm starts on (``GRPODECK_WARM_START``), fork available, and the training
    stack imported, by this call the first time (``preload``, with transformers' integration
    switches, calling ``tick`` every ``every`` seconds meanwhile)."""
    return get_settings().warm_start and can_fork() and preload(QUIET_INTEGRATIONS, tick, every)


def preload(environment: Mapping[str, str], tick: Callable[[], object],
            every: float) -> bool:
    """Import the training stack into this process, once, with ``environment`` (the switches
    the child gets, e.g. transformers' DISABLE_MLFLOW_INTEGRATION) set while it imports; True
    when it is imported. The import (~10 s, more on a loaded host) runs on a thread while this
    one calls ``tick`` every ``every`` seconds: the supervisor keeps saying the run is alive
    (the server ends a silent run as lost) and keeps listening for a stop. The thread has ended,
    down to its OS thread (``wait_gone``), before this returns, so the fork that follows copies
    no thread of ours. An import that fails is logged and answers False: the caller starts a
    fresh interpreter, which fails the same way and reports it as the run's error."""
    global _preloaded
    if _preloaded:
        return True
    started = time.monotonic()
    failed: list[BaseException] = []

    def load() -> None:
        try:
            for name in TRAINING_STACK:
                importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - said below; a fresh start reports it
            failed.append(exc)

    with temporary_environment(environment):
        loader = threading.Thread(target=load, name="preload-training-stack", daemon=True)
        loader.start()
        loader.join(every)
        while loader.is_alive():
            tick()
            loader.join(every)
    wait_gone(loader.native_id)
    if failed:
        log.warning("importing the training stack failed (%s): this run starts cold", failed[0])
        return False
    _preloaded = True
    log.info("training stack imported in %.1f s: later runs of this process start warm",
             time.monotonic() - started)
    return True


def wait_gone(native_id: int | None, deadline_s: float = 5.0) -> bool:
    """Wait until the kernel no longer lists thread ``native_id`` of this process; True once
    it is gone. ``Thread.join`` returns when the thread's Python code has ended, while the OS
    thread still runs its C-level exit for a moment (the thread-local destructors of the
    libraries it used: allocator caches, OpenMP and BLAS state), and such an exit may hold a
    lock: a fork in that moment copies the lock held, with no thread left in the child to
    release it."""
    if native_id is None:
        return True
    task = f"/proc/self/task/{native_id}"
    deadline = time.monotonic() + deadline_s
    while os.path.exists(task):
        if time.monotonic() > deadline:
            log.warning("thread %s still runs %.0f s after its end", native_id, deadline_s)
            return False
        time.sleep(0.001)
    return True


class ForkedChild:
    """What the supervisor needs of ``subprocess.Popen`` (``pid``, ``returncode``, ``poll``,
    ``wait``) for a child made by ``fork``; ``wait`` sleeps on the child's pidfd, not a poll."""

    def __init__(self, pid: int, args: list[str]) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None

    def poll(self) -> int | None:
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self._reaped(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], left)
            else:
                time.sleep(0.05 if left is None else min(0.05, left))
        assert self.returncode is not None
        return self.returncode

    def _reaped(self, status: int) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def fork_child(main: Callable[[list[str]], int], argv: list[str], env: Mapping[str, str],
               stdout: IO[bytes], stderr: IO[bytes], program: str,
               title: list[str]) -> ForkedChild:
    """Fork a child that runs ``main(argv)`` as ``program`` would have, in its own session,
    with ``env`` as its whole environment and its output on ``stdout``/``stderr``. ``title`` is
    the command line it shows in ``ps`` (and to psutil): the one a fresh start would have run,
    not the pool process's."""
    if threading.active_count() > 1:  # a thread holding a lock at the fork would hang the child
        log.warning("forking the training child with %d threads running",
                    threading.active_count())
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    # setproctitle finds the memory it may write the title over when first used, by way of
    # the environment block: in the child, after its environment is replaced, it would not.
    setproctitle.getproctitle()
    pid = os.fork()
    if pid:
        return ForkedChild(pid, title)
    code = 1
    try:
        os.setsid()
        _fresh_process(env, stdout.fileno(), stderr.fileno(), [program, *argv])
        setproctitle.setproctitle(" ".join(title))  # once it is what the title says
        code = _exit_code(main, argv)
    except BaseException:  # noqa: BLE001 - the child could not be made: say why on its stderr
        with contextlib.suppress(BaseException):
            os.write(stderr.fileno(), traceback.format_exc().encode())
    finally:
        _exit(code)
    raise AssertionError("unreachable")  # pragma: no cover


def _fresh_process(env: Mapping[str, str], out_fd: int, err_fd: int, argv: list[str]) -> None:
    """What a new interpreter would have had: the pool process's signal handlers, logging
    handlers, exit hooks and stdio redirection (Celery's logging proxy) undone."""
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            if callable(signal.getsignal(sig)):
                signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, encoding="utf-8",  # noqa: SIM115
                                       errors="backslashreplace", closefd=False)
    os.environ.clear()
    os.environ.update(env)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    atexit._clear()  # the pool process's exit hooks are not this process's
    random.seed()
    sys.argv = argv


def _exit_code(main: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's errors, sys.exit() in a trainer callback
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - a fresh interpreter would print it and exit 1
        traceback.print_exc()
        return 1


def _exit(code: int) -> None:
    """Leave as a fresh interpreter would (its own exit hooks, flushed output), never through
    the pool process's shutdown."""
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code)
