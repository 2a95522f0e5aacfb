"""``--cpu-log`` (tests/cpu_accounting.py) counts the CPU a test's processes use: a finished
subprocess's, a still-running one's once, and nothing twice when a module's process is reaped
later. A nested pytest (a real run of the plugin) on tests that burn known CPU in children."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cpu_accounting import summary

ROOT = Path(__file__).resolve().parents[1]
BURN_S = 0.6  # CPU seconds each burning child spends
NESTED = f'''
import subprocess, sys, time
from pathlib import Path
import pytest

BURN = "import time\\nend = time.process_time() + {BURN_S}\\nwhile time.process_time() < end: pass"

@pytest.fixture(scope="module")
def background():
    child = subprocess.Popen([sys.executable, "-c", BURN + "\\nopen('burnt', 'w').close()"
                              "\\ntime.sleep(60)"])
    yield child
    child.kill()
    child.wait()

def test_burns_in_a_finished_child():
    subprocess.run([sys.executable, "-c", BURN], check=True)

def test_burns_in_a_running_child(background):
    deadline = time.monotonic() + 60
    while not Path("burnt").exists():  # the child's CPU is spent; it sleeps now
        assert time.monotonic() < deadline
        time.sleep(0.05)

def test_reaps_the_running_child(background):
    pass

def test_idle():
    pass
'''


def test_each_test_is_charged_the_cpu_of_its_processes_once(tmp_path: Path) -> None:
    (tmp_path / "test_nested.py").write_text(NESTED)
    log = tmp_path / "cpu.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "tests.cpu_accounting", f"--cpu-log={log}", "-p", "no:randomly",
                           "test_nested.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    cpu = {line["test"].split("::")[1]: line["cpu"] for line in lines}
    assert cpu["test_burns_in_a_finished_child"] >= BURN_S * 0.8, cpu
    assert cpu["test_burns_in_a_running_child"] >= BURN_S * 0.8, cpu
    assert cpu["test_reaps_the_running_child"] < BURN_S / 2, cpu  # counted already, not again
    assert cpu["test_idle"] < BURN_S / 2, cpu
    report = summary(lines)
    assert f"{len(lines)} tests" in report and "test_nested.py" in report
    costliest = report.splitlines()[-len(lines)]  # the tests' list, costliest first
    assert "test_burns_in_a" in costliest, report
