"""Hostile completions through the real ``unit_tests`` reward and the real sandbox.

Each program is what a policy model could write. Every one must end with reward 0, a reason,
and this process (the worker) alive with its environment, working directory and files as they
were. Nothing is mocked: the programs run under prlimit/unshare exactly as in training.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worker import sandbox
from worker.rewards.code import run_unit_tests

TOKEN = "tok-3f9a-secret-run-token"
FAST = sandbox.Limits(wall_seconds=3, cpu_seconds=3)


def fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}\n```\n"


@pytest.fixture
def worker_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """The worker's secrets and a file outside the sandbox; checked unchanged afterwards."""
    monkeypatch.setenv("GRPODECK_RUN_TOKEN", TOKEN)
    # Not under /tmp: the sandbox mounts its own /tmp, so a host file there is not even visible.
    base = Path(__file__).resolve().parent
    if str(base).startswith(("/tmp/", "/var/tmp/", "/dev/shm/")):  # a checkout in /tmp
        base = Path.home()
    victim = base / f".sandbox-victim-{os.getpid()}.txt"
    victim.write_text("original")
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def recorded_mkdtemp(*args: Any, **kwargs: Any) -> str:
        """Names the directories this process made (TemporaryDirectory calls mkdtemp too): an
        other xdist worker's sandbox runs in the same temporary folder, so a glob of that
        folder would see its directories as well."""
        name = real_mkdtemp(*args, **kwargs)
        made.append(name)
        return name

    monkeypatch.setattr(tempfile, "mkdtemp", recorded_mkdtemp)
    before = {"pid": os.getpid(), "cwd": os.getcwd(), "env": environment(),
              "victim": victim, "made": made}
    try:
        yield before
        assert os.getpid() == before["pid"]
        assert os.getcwd() == before["cwd"]
        assert environment() == before["env"]
        assert victim.read_text() == "original"
        left = [name for name in made if Path(name).exists()]
        assert not left, f"a sandbox working directory was left behind: {left}"
    finally:
        victim.unlink()


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def score(code: str, tests: object = "assert f() == 1") -> tuple[float | None, str | None, float]:
    outcomes, seconds = run_unit_tests([fenced(code)], [tests], limits=FAST)
    return outcomes[0].score, outcomes[0].reason, (seconds or [0.0])[0]


def test_a_correct_solution_scores_1_and_this_host_isolates_fully() -> None:
    value, reason, seconds = score("def f():\n    return 1")
    assert (value, reason) == (1.0, None)
    assert seconds > 0  # measured; how long two interpreter starts take depends on the load
    mode = sandbox.isolation()
    assert mode.namespaces, "this host supports user namespaces: the sandbox must use them"


def test_infinite_loop_is_killed_at_the_wall_timeout(worker_state: dict[str, object]) -> None:
    started = time.monotonic()
    value, reason, _ = score("while True:\n    pass")
    assert (value, reason) == (0.0, "timeout")
    assert time.monotonic() - started < FAST.wall_seconds + 2


def test_sleeping_child_processes_die_with_the_program() -> None:
    """A daemon started by the completion must not outlive it (pid namespace / group kill)."""
    marker = f"grpodeck-orphan-{os.getpid()}"
    code = ("import subprocess\n"
            f"subprocess.Popen(['/bin/sh', '-c', 'exec -a {marker} sleep 60'])\n"
            "def f():\n    return 2")
    value, reason, _ = score(code)
    assert value == 0.0 and reason.startswith("failed test 1/1")
    time.sleep(0.2)
    found = subprocess.run(["pgrep", "-f", marker], check=False, capture_output=True,
                           text=True).stdout
    assert not found.strip(), f"a sandboxed process survived: {found}"


def test_fork_bomb_hits_the_process_limit(worker_state: dict[str, object]) -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    value, reason, _ = score(code)
    assert value == 0.0 and reason == "timeout"
    # The host can still start processes at once.
    assert subprocess.run(["true"], check=False).returncode == 0


def test_memory_hog_gets_memory_error() -> None:
    value, reason, _ = score("blob = bytearray(8 * 1024**3)\ndef f():\n    return 1")
    assert (value, reason) == (0.0, "memory limit")


def test_huge_output_is_capped() -> None:
    """The completion's prints go to /dev/null (only the judge writes results), so a flood ends
    at the timeout; a sandboxed program that floods its own stdout is cut at the cap."""
    flood = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"
    assert score(flood)[:2] == (0.0, "timeout")
    result = sandbox.run_python(flood, limits=FAST)
    assert result.status == "output_limit" and len(result.stdout) <= FAST.output_bytes


def test_writing_outside_its_directory_fails(worker_state: dict[str, object]) -> None:
    victim = worker_state["victim"]
    code = (f"open({str(victim)!r}, 'w').write('pwned')\n"
            "def f():\n    return 1")
    value, reason, _ = score(code)
    # The project directory is hidden (an empty tmpfs), or its own uid may not even reach the
    # file (a 0700 home), or the file system is read-only: refused in every case.
    assert value == 0.0 and reason.startswith(("crashed: OSError: [Errno 30] Read-only file system",
                                               "crashed: PermissionError",
                                               "crashed: FileNotFoundError"))
    # Read-only holds without the uid switch too (a worker that does not run as root).
    same_uid = sandbox.Isolation(namespaces=True, own_uid=False, python=sandbox.sandbox_python())
    result = sandbox._run("open('/usr/grpodeck-escape', 'w').write('pwned')", "", FAST,
                          same_uid, 0)
    assert result.status == "error" and "Read-only file system" in result.stderr
    # /tmp inside the sandbox is private: a file there never reaches the host's /tmp.
    value, reason, _ = score("open('/tmp/grpodeck-escape', 'w').write('x')\n"
                             "open('/dev/shm/grpodeck-escape', 'w').write('x')\ndef f():\n    return 2")
    assert value == 0.0 and reason.startswith("failed test")
    assert not Path("/tmp/grpodeck-escape").exists()
    assert not Path("/dev/shm/grpodeck-escape").exists()


def test_reading_the_worker_environment_finds_no_token(worker_state: dict[str, object]) -> None:
    """It looks everywhere it can: its environment, every /proc/*/environ, the parent's."""
    code = ("import os, glob\nseen = str(os.environ)\n"
            "for p in glob.glob('/proc/*/environ'):\n"
            "    try:\n        seen += open(p).read()\n    except OSError:\n        pass\n"
            "def f():\n    return 1 if " + repr(TOKEN) + " in seen else 0")
    assert score(code)[:2] == (0.0, "failed test 1/1: assert failed")


def test_opening_a_socket_reaches_nothing() -> None:
    """A real listener on the host's loopback is not reachable from inside."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        code = ("import socket\ndef f():\n"
                f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    return 1")
        value, reason, _ = score(code)
    finally:
        server.close()
    assert value == 0.0 and reason.startswith("failed test 1/1: OSError")


def test_killing_its_parent_leaves_the_worker_alive(worker_state: dict[str, object]) -> None:
    code = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(0, signal.SIGKILL)"
    value, reason, _ = score(code)
    # Inside its pid namespace it is init, which ignores its own SIGKILL; its parent (unshare,
    # outside) may die first and take it along: either way no pass, and the worker lives on.
    # Or the solution's own process group dies first: the judge reports that it is gone.
    assert value == 0.0 and reason.startswith(("exited before the tests finished",
                                               "failed test 1/1: NameError",
                                               "crashed: SolutionGone"))


def test_deep_recursion_scores_zero() -> None:
    value, reason, _ = score("def f():\n    return f()")
    assert value == 0.0 and "RecursionError" in reason
    value, reason, _ = score("import sys\nsys.setrecursionlimit(10**8)\ndef g(n):\n"
                             "    return g(n + 1)\ng(0)")
    # 3.11 keeps Python frames off the C stack: it ends in a limit, a crash or a signal.
    assert value == 0.0 and reason.startswith(
        ("exited before the tests finished", "crashed", "timeout", "memory limit"))


def test_os_exit_inside_the_tests_is_not_a_pass() -> None:
    """Exit code 0 before the harness finished, or printing a fake verdict, scores 0."""
    value, reason, _ = score("import os\ndef f():\n    os._exit(0)")
    assert (value, reason) == (
        0.0, "failed test 1/1: SolutionGone: the solution's process exited (exit code 0)")
    value, reason, _ = score('print(\'x {"kind": "done"}\')\nimport os\nos._exit(0)')
    assert (value, reason) == (
        0.0, "crashed: SolutionGone: the solution's process exited (exit code 0)")


def test_many_programs_run_in_parallel_up_to_the_cpu_count() -> None:
    """Eight one-second sleepers: one after another, the batch takes at least the sum of
    their own times; in parallel on two or more CPUs it takes about half of that, however
    loaded the machine is. (A fixed "under 8 s" had little room: each program also starts two
    interpreters, 0.4 s a program with the suite running beside it, more under heavier load.)"""
    assert (os.cpu_count() or 1) >= 2, "needs two CPUs to show parallelism"
    started = time.monotonic()
    outcomes, seconds = run_unit_tests(
        [fenced("import time\ntime.sleep(1.0)\ndef f():\n    return 1")] * 8,
        ["assert f() == 1"] * 8, limits=FAST)
    elapsed = time.monotonic() - started
    assert [o.score for o in outcomes] == [1.0] * 8 and all(s >= 1.0 for s in seconds)
    # In series the batch takes at least the sum of the programs' own times (each is two
    # interpreters, judge and solution, and a one-second sleep); two at a time about half.
    assert elapsed < 0.8 * sum(seconds), (
        f"{elapsed:.2f} s for programs of {sum(seconds):.2f} s in all: not run in parallel")
