"""A dry run's sampling child forked warm (``worker.dry_run._run_child`` with
``worker.training.warm``) answers exactly what a fresh ``python -m worker.dry_run`` answers, keeps
the server told it is alive while the pool process imports the training stack, takes a crashing
reward down with it alone, and is killed and reaped when it overruns.

The "pool process" is a separate interpreter, as in tests/worker/test_warm_start.py, so nothing
is forked from the test process. It records each fork (``warm.fork_child`` wrapped, not
replaced) so the test knows which way each child started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import tiny_spec

ROOT = Path(__file__).resolve().parents[2]

POOL_PROCESS = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from worker import dry_run
    from worker.settings import get_settings
    from worker.training import warm

    out = Path(sys.argv[1])
    specs = json.loads(sys.argv[2])
    forks, pings = [], []
    real_fork = warm.fork_child

    def recording_fork(*args, **kwargs):
        child = real_fork(*args, **kwargs)
        forks.append(child.pid)
        return child

    warm.fork_child = recording_fork

    def run(name, spec, warm_start, timeout=None):
        os.environ["GRPODECK_WARM_START"] = "true" if warm_start else "false"
        get_settings.cache_clear()
        if timeout is not None:
            dry_run.CHILD_TIMEOUT_S = timeout
        folder = out / name
        folder.mkdir()
        (folder / "spec.json").write_text(json.dumps(specs[spec]))
        result = folder / "result.json"
        body = dry_run._run_child(
            ["--spec", str(folder / "spec.json"), "--prompts", "2", "--out", str(result)],
            folder, lambda: pings.append(name), 0.2)
        return {"body": body, "forks": list(forks), "pings": pings.count(name),
                "result": json.loads(result.read_text()) if result.exists() else None}

    report = {"cold": run("cold", "tiny", False), "warm": run("warm", "tiny", True),
              "crash": run("crash", "crash", True), "late": run("late", "heavy", True, timeout=0.3)}
    print(json.dumps(report))
""")


# A reward that takes its interpreter down (a grader attacked into crashing, an extension that
# segfaults): the forked child dies, the pool process must not.
CRASHING_REWARD = "import os, signal\n\ndef crash(**_):\n    os.kill(os.getpid(), signal.SIGKILL)\n"


def pool_process(tmp_path: Path, specs: dict[str, object]) -> dict[str, dict]:  # type: ignore[type-arg]
    (tmp_path / "crash_reward_for_dry_run.py").write_text(CRASHING_REWARD)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}",
           "GRPODECK_CUSTOM_REWARDS": "crash_reward_for_dry_run:crash"}
    done = subprocess.run([sys.executable, "-c", POOL_PROCESS, str(tmp_path), json.dumps(specs)],
                          check=False, capture_output=True, text=True, timeout=600, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_warm_dry_run_answers_as_a_fresh_one_and_a_crashed_or_overrun_child_ends_alone(
        tmp_path: Path) -> None:
    heavy = tiny_spec(name="slow", max_completion_length=512, num_generations=16)  # seconds
    crash = tiny_spec(name="crash", rewards=[
        {"name": "custom", "params": {"path": "crash_reward_for_dry_run:crash"}}])
    report = pool_process(tmp_path, {"tiny": tiny_spec(name="dry", seed=7), "heavy": heavy,
                                     "crash": crash})
    cold, warm, crashed, late = (report[k] for k in ("cold", "warm", "crash", "late"))

    assert cold["body"] is None and cold["forks"] == []  # GRPODECK_WARM_START=false: exec'd
    assert warm["body"] is None and len(warm["forks"]) == 1  # forked from the pool process
    assert warm["pings"] >= 2  # told the server it was alive while it imported the stack
    for key in ("weights", "groups", "error", "reference"):
        assert warm["result"][key] == cold["result"][key], key  # same completions, same scores
    assert len(cold["result"]["groups"]) == 2 and cold["result"]["error"] is None

    assert len(crashed["forks"]) == 2 and crashed["result"] is None  # the pool process lived on
    assert crashed["body"]["error"].startswith("the dry run failed (exit -9):")

    assert len(late["forks"]) == 3 and late["result"] is None
    assert late["body"] == {"error": "the dry run took longer than 0.3 s and was stopped"}
    assert not Path(f"/proc/{late['forks'][-1]}").exists()  # killed and reaped, not left
