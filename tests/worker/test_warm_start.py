"""Warm starts (``worker.training.warm``): a training child forked from a pool process that has
the training stack imported must look like a fresh ``python -m worker.training.child`` where it
matters: its own session, its output on the run's files, the environment it was given, default
signal handlers, no logging handlers or exit hooks of the pool process, its own exit code.

The "pool process" here is a separate interpreter set up the way Celery leaves one (a SIGTERM
handler, a root logging handler, an exit hook, stdout redirected to a logger), so nothing is
forked from the test process itself."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from grpodeck.contract.spec import RunSpec
from tests.test_supervise import alive, wait_for
from worker.supervise import kill_group
from worker.training import warm
from worker.training.child import _offline_if_builtin

ROOT = Path(__file__).resolve().parents[2]

POOL_PROCESS = textwrap.dedent("""
    import atexit, io, json, logging, os, signal, sys, time
    from pathlib import Path
    from worker.training import warm

    out = Path(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda *_: None)          # billiard's handlers
    logging.getLogger().addHandler(logging.StreamHandler())  # the pool's logging
    atexit.register(lambda: (out / f"pool-exit-{os.getpid()}").write_text("ran"))
    sys.stdout = io.StringIO()                               # Celery's stdout proxy

    def main(argv):
        import logging, signal
        atexit.register(lambda: (out / "child-exit").write_text("ran"))
        print("to stdout", argv)
        print("to stderr", file=sys.stderr)
        (out / "seen.json").write_text(json.dumps({
            "own_session": os.getsid(0) == os.getpid(), "environ": dict(os.environ),
            "argv": sys.argv, "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
            "root_handlers": len(logging.getLogger().handlers), "pid": os.getpid()}))
        if argv == ["raise"]:
            raise RuntimeError("the trainer broke")
        return 7

    with (out / "stdout.log").open("wb") as o, (out / "stderr.log").open("wb") as e:
        child = warm.fork_child(main, sys.argv[2:], {"ONLY": "this", "GRPODECK_RUN_TOKEN": "tok"},
                                o, e, program="/x/child.py", title=["python", "-m", "the.child"])
        print(json.dumps({"rc": child.wait(60), "pid": child.pid}), file=sys.__stdout__)
""")


def pool_process(tmp_path: Path, *args: str) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", POOL_PROCESS, str(tmp_path), *args],
                          capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    return json.loads(done.stdout)


def test_a_forked_child_has_its_own_session_environment_output_and_exit_code(
        tmp_path: Path) -> None:
    reply = pool_process(tmp_path, "--spec", "s.json")
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert reply["rc"] == 7 and seen["pid"] == reply["pid"]
    assert seen["own_session"]
    assert seen["environ"] == {"ONLY": "this", "GRPODECK_RUN_TOKEN": "tok"}
    assert seen["argv"] == ["/x/child.py", "--spec", "s.json"]
    assert seen["sigterm_default"] and seen["root_handlers"] == 0
    assert (tmp_path / "stdout.log").read_text() == "to stdout ['--spec', 's.json']\n"
    assert (tmp_path / "stderr.log").read_text() == "to stderr\n"
    assert (tmp_path / "child-exit").read_text() == "ran"  # its own exit hooks ran
    assert not (tmp_path / f"pool-exit-{reply['pid']}").exists()  # the pool's did not


def test_a_child_that_raises_exits_1_with_its_traceback_on_its_stderr(tmp_path: Path) -> None:
    assert pool_process(tmp_path, "raise")["rc"] == 1
    err = (tmp_path / "stderr.log").read_text()
    assert "Traceback" in err and "RuntimeError: the trainer broke" in err


def _sleeper(argv: list[str]) -> int:
    """A child that starts a grandchild in its session, says so, and sleeps."""
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(argv[0]).write_text(str(grandchild.pid))
    threading.Event().wait(120)
    return 0


def test_wait_times_out_while_it_runs_and_kill_group_takes_its_whole_session(
        tmp_path: Path) -> None:
    marker = tmp_path / "grandchild"
    with (tmp_path / "o").open("wb") as out, (tmp_path / "e").open("wb") as err:
        child = warm.fork_child(_sleeper, [str(marker)], dict(os.environ), out, err,
                                program="sleeper", title=["sleeper"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=0.3)
        assert child.poll() is None
        wait_for(marker.exists, "the child to start its grandchild", timeout=60)
        grandchild = int(marker.read_text())
        assert Path(f"/proc/{child.pid}/cmdline").read_bytes().startswith(b"sleeper")
    finally:
        kill_group(child, grace=10)
    assert child.returncode == -15
    wait_for(lambda: not alive(grandchild), "the grandchild to die with the group")


def test_the_first_import_ticks_and_leaves_one_thread_and_later_calls_do_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "slow_stack_for_warm_test.py").write_text(
        "import os, time\nIMPORTED_WITH = os.environ.get('SWITCH')\ntime.sleep(1.0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warm, "TRAINING_STACK", ("slow_stack_for_warm_test",))
    monkeypatch.setattr(warm, "_preloaded", False)
    monkeypatch.delenv("SWITCH", raising=False)
    ticks: list[int] = []
    before = set(threading.enumerate())  # other tests in this process may keep threads of their own
    tasks = set(os.listdir("/proc/self/task"))
    assert warm.preload({"SWITCH": "on"}, lambda: ticks.append(1), every=0.1)
    assert len(ticks) >= 3  # the supervisor kept polling the server during the import
    assert set(threading.enumerate()) == before  # the loader is gone: the fork copies no thread of ours
    assert set(os.listdir("/proc/self/task")) <= tasks  # down to its OS thread (wait_gone)
    assert sys.modules["slow_stack_for_warm_test"].IMPORTED_WITH == "on"
    assert "SWITCH" not in os.environ  # the switch was set for the import only
    ticks.clear()
    assert warm.preload({"SWITCH": "on"}, lambda: ticks.append(1), every=0.1)
    assert ticks == []


def test_an_import_that_fails_answers_false_so_the_run_starts_cold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_stack_for_warm_test.py").write_text("raise ImportError('no CUDA here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warm, "TRAINING_STACK", ("broken_stack_for_warm_test",))
    monkeypatch.setattr(warm, "_preloaded", False)
    assert warm.preload({}, lambda: None, every=0.1) is False
    assert warm._preloaded is False


def test_built_in_runs_switch_hub_libraries_already_imported_offline_and_back() -> None:
    """A warm child has huggingface_hub and datasets imported before it reads its spec: their
    offline switches, read from the environment at import, are set on the modules too."""
    import datasets.config
    import huggingface_hub.constants

    before = (huggingface_hub.constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE,
              datasets.config.HF_DATASETS_OFFLINE)
    builtin = RunSpec.model_validate({"model": "builtin:tiny-random",
                                      "dataset": "builtin:short-prompts"})
    with _offline_if_builtin(builtin):
        assert huggingface_hub.constants.is_offline_mode()
        assert datasets.config.HF_HUB_OFFLINE and datasets.config.HF_DATASETS_OFFLINE
    assert (huggingface_hub.constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE,
            datasets.config.HF_DATASETS_OFFLINE) == before
    hub = RunSpec.model_validate({"model": "Qwen/Qwen2.5-0.5B-Instruct",
                                  "dataset": "builtin:short-prompts"})
    with _offline_if_builtin(hub):
        assert huggingface_hub.constants.HF_HUB_OFFLINE == before[0]


def test_wait_gone_returns_once_the_os_thread_has_left_not_when_its_python_ended() -> None:
    """A native thread (pthread_create of libc's sleep(1): no Python in it, as a thread's
    C-level exit after its Python code ended) is waited for until the kernel drops it."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = set(os.listdir("/proc/self/task"))
    handle = ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(handle), None, ctypes.cast(libc.sleep,
                                                                        ctypes.c_void_p),
                               ctypes.c_void_p(1)) == 0
    try:
        (native,) = set(os.listdir("/proc/self/task")) - before
        assert warm.wait_gone(int(native), deadline_s=30)
        assert not Path(f"/proc/self/task/{native}").exists()
        assert not warm.wait_gone(os.getpid(), deadline_s=0.05)  # this one never leaves
    finally:
        libc.pthread_join(handle, None)
