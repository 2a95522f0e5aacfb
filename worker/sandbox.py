"""Run untrusted Python (model completions) in a contained child process.

Model output is hostile input: a completion may loop, fork, hog memory, flood its output, write
where it should not, open sockets or look for the worker's secrets. Each program runs as

    prlimit (CPU, address space, file size, processes, no core)
      -> [own uid] unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc
         -> python -I -S -c <worker/sandbox_mounts.py>: every mount read-only; tmpfs on /tmp,
                /var/tmp, /dev/shm (+/run/lock); empty read-only tmpfs over ``hidden_paths()``
                (project, data, homes); cd /tmp
            -> setpriv --no-new-privs --bounding-set=-all (no capabilities left)
               -> python -I -S -c SOURCE  (standard library only, no site, no PYTHON* variables)

What holds where (``isolation()`` says which mode this host got; the README repeats it):

* always: a new session/process group killed with SIGKILL at the wall timeout; rlimits; a scrubbed
  environment (PATH, LANG, HOME only); stdout/stderr written to files whose size the file-size
  limit caps (we read at most ``output_bytes`` of each); an empty working directory removed after.
* ``namespaces`` (user+net+pid+mount namespaces work here): no network at all (a fresh network
  namespace has only a down loopback); its own /proc and pid space, so it sees no worker process
  and every process it started dies with it; the whole file system is read-only to it and
  /tmp-like directories are private tmpfs, so even at the worker's own uid it writes nothing;
  the project checkout (with ``var/`` and the database), the data directories and homes are
  empty to it; it holds no capability, so it cannot trace another sandboxed process (the
  ``unit_tests`` judge) or undo a mount. Other world-readable host files (``/etc``, ``/usr``)
  stay readable: the interpreter needs them.
* ``own_uid`` (the worker runs as root): the program runs as an unused uid per parallel slot, so
  it cannot write the worker's files and the process limit really applies (root ignores
  RLIMIT_NPROC). A non-root worker keeps its uid: the program can then read what the worker's
  user can read, and RLIMIT_NPROC is set above that user's current process count.

Parallel programs run on a thread pool as wide as the CPU count; each returns its wall time so
the trainer can report the sandbox's cost per completion.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_SOURCE_CHARS = 100_000  # one argv string is at most 128 KiB (MAX_ARG_STRLEN)
SLOTS = 64  # parallel programs per worker process, each with its own uid when root
UID_BASE = 2_000_000  # far above any real account; slots of one process are consecutive
SCRUBBED_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}


@functools.cache
def mounts_program() -> str:
    """The source of ``worker/sandbox_mounts.py``: the first program inside the namespaces (every
    mount read-only, private tmpfs, hidden paths), run by the sandbox's interpreter with ``-c``."""
    return Path(__file__).with_name("sandbox_mounts.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Limits:
    """Per-program limits. Defaults fit unit-test style programs (well under a second each)."""

    wall_seconds: float = 5.0
    cpu_seconds: int = 5
    memory_mb: int = 512
    output_bytes: int = 256_000  # also the largest file the program may write
    processes: int = 32
    tmpfs_mb: int = 16


@dataclass(frozen=True)
class Result:
    """What one program did. ``status``: ok | error | timeout | output_limit | refused."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None


@dataclass(frozen=True)
class Isolation:
    """Which containment this host gives (probed once per process)."""

    namespaces: bool
    own_uid: bool
    python: str

    def describe(self) -> str:
        parts = ["rlimits", "process-group kill", "scrubbed env", "capped output", "temp cwd"]
        parts += (["no network", "pid+mount namespaces", "read-only file system",
                   "private /tmp", "project/data/home hidden", "no capabilities"]
                  if self.namespaces
                  else ["NO network isolation (namespaces unavailable)"])
        parts.append("own uid per slot" if self.own_uid else "worker's uid")
        return ", ".join(parts)


def sandbox_python() -> str:
    """An interpreter every uid can run: $GRPODECK_SANDBOX_PYTHON, the system python3, or ours."""
    configured = os.environ.get("GRPODECK_SANDBOX_PYTHON")
    if configured:
        return configured
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def _sqlite_directory(url: str) -> list[str]:
    """The folder of a SQLite database URL (the web app's, when it shares this host)."""
    if not url.startswith("sqlite:///"):
        return []
    return [str(Path(url.removeprefix("sqlite:///").split("?")[0]).parent)]


@functools.cache
def hidden_paths() -> tuple[str, ...]:
    """What a sandboxed program must not read, even world-readable: the project checkout (code,
    ``.env``, ``var/`` with the database), the data directories, the database's folder, homes,
    and ``$GRPODECK_SANDBOX_HIDE`` (``:``-separated). A path holding the sandbox's interpreter
    stays visible (the program could not start otherwise)."""
    from grpodeck.contract.tasks import ROOT, VAR
    from worker.settings import get_settings

    settings = get_settings()
    wanted = [ROOT, VAR, settings.runs_dir, settings.datasets_dir, settings.models_dir,
              Path.home(), Path("/root"), Path("/home"),
              *_sqlite_directory(os.environ.get("GRPODECK_DATABASE_URL", "")),
              *(p for p in os.environ.get("GRPODECK_SANDBOX_HIDE", "").split(":") if p)]
    python = Path(sandbox_python())
    keep = {python.absolute(), python.resolve()}
    out: list[str] = []
    for raw in wanted:
        path = Path(raw).absolute()
        if path == Path("/") or any(k == path or k.is_relative_to(path) for k in keep):
            continue
        if str(path) not in out:
            out.append(str(path))
    return tuple(out)


_slots: queue.SimpleQueue[int] = queue.SimpleQueue()
for _i in range(SLOTS):
    _slots.put(_i)


def _slot_uid(slot: int) -> int:
    return UID_BASE + (os.getpid() % 4096) * SLOTS + slot


def _user_processes() -> int:
    """Processes of this uid now: RLIMIT_NPROC counts them all, so a non-root limit sits above."""
    uid = os.getuid()
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


def _command(source: str, limits: Limits, isolation: Isolation) -> list[str]:
    nproc = limits.processes if isolation.own_uid else _user_processes() + limits.processes
    prlimit = [shutil.which("prlimit") or "prlimit", f"--cpu={limits.cpu_seconds}",
               f"--as={limits.memory_mb * 2**20}", f"--fsize={limits.output_bytes}",
               f"--nproc={nproc}", "--core=0", "--"]
    if not isolation.namespaces:
        return [*prlimit, isolation.python, "-I", "-S", "-c", source]
    unshare = [shutil.which("unshare") or "unshare", "--user", "--map-root-user", "--net",
               "--pid", "--fork", "--kill-child", "--mount-proc", "--"]
    return [*prlimit, *unshare, isolation.python, "-I", "-S", "-c", mounts_program(), "auto",
            isolation.python, source, f"{limits.tmpfs_mb}m", shutil.which("setpriv") or "setpriv",
            *hidden_paths()]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_capped(path: Path, cap: int) -> tuple[str, bool]:
    with path.open("rb") as f:
        data = f.read(cap + 1)
    return data[:cap].decode("utf-8", errors="replace"), len(data) >= cap


def _run(source: str, stdin: str, limits: Limits, isolation: Isolation, slot: int) -> Result:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grpodeck-sbx-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir(mode=0o700)
        user: dict[str, object] = {}
        if isolation.own_uid:
            uid = _slot_uid(slot)
            os.chown(work, uid, uid)
            user = {"user": uid, "group": uid, "extra_groups": []}
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(  # fixed argv: the source is one argument, never a shell
                _command(source, limits, isolation), stdin=subprocess.PIPE, stdout=out,
                stderr=err, cwd=work, env=dict(SCRUBBED_ENV), start_new_session=True,
                close_fds=True, **user)  # type: ignore[call-overload]
            timed_out = _feed_and_wait(proc, stdin, limits.wall_seconds)
            _kill_group(proc.pid)  # stragglers that stayed in the group (no-namespace mode)
        stdout, out_full = _read_capped(out_path, limits.output_bytes)
        stderr, err_full = _read_capped(err_path, limits.output_bytes)
    status = ("timeout" if timed_out or proc.returncode == -signal.SIGXCPU
              else "output_limit" if out_full or err_full
              else "ok" if proc.returncode == 0 else "error")
    return Result(status, proc.returncode, stdout, stderr, time.monotonic() - started)


def _feed_and_wait(proc: subprocess.Popen[bytes], stdin: str, wall: float) -> bool:
    """Write stdin (a program that never reads it cannot block us), wait; True if killed."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    try:
        proc.wait(timeout=wall)
        return False
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        return True


def run_python(source: str, stdin: str = "", limits: Limits | None = None) -> Result:
    """Run one program under the limits; never raises for anything the program does."""
    limits = limits or Limits()
    if len(source) > MAX_SOURCE_CHARS or "\x00" in source:
        return Result("refused", None, "", "program too long or contains NUL bytes", 0.0)
    slot = _slots.get()
    try:
        return _run(source, stdin, limits, isolation(), slot)
    finally:
        _slots.put(slot)


def run_many(programs: Sequence[tuple[str, str]], limits: Limits | None = None,
             workers: int | None = None) -> list[Result]:
    """``(source, stdin)`` pairs run in parallel, up to the CPU count; results in input order."""
    if not programs:
        return []
    width = max(1, min(workers or os.cpu_count() or 1, len(programs), SLOTS))
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="sandbox") as pool:
        return list(pool.map(lambda p: run_python(p[0], p[1], limits), programs))


def _probe(isolation: Isolation) -> bool:
    """Does a trivial program run, and print, in this mode?"""
    try:
        result = _run("print('ok')", "", Limits(wall_seconds=20), isolation, slot=SLOTS - 1)
    except OSError:
        return False
    return result.status == "ok" and result.stdout.strip() == "ok"


@functools.cache
def isolation() -> Isolation:
    """The strongest mode that works on this host, tried once per process and logged."""
    python = sandbox_python()
    root = os.geteuid() == 0
    for candidate in (Isolation(True, root, python), Isolation(False, root, python),
                      Isolation(False, False, python)):
        if _probe(candidate):
            log.info("code sandbox: %s", candidate.describe())
            return candidate
    raise RuntimeError(f"the code sandbox cannot run {python}; set GRPODECK_SANDBOX_PYTHON")
