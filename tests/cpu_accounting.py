"""Where the suite's CPU goes: CPU seconds per test, its processes included (``--cpu-log``).

Why: ``make test`` is CPU-bound on two cores (2026-12-06: 1,837 of the 1,948 CPU-seconds the
machine had during a 16-minute run were busy), so a test's wall time (``--durations``) says
little about what it costs the suite: a live test that waits 60 s for an outage costs a few
CPU-seconds, while a 20-second bench smoke run can cost 50. What a test costs is the CPU of
everything it runs: the xdist worker itself, and the servers, workers, trainings, browsers and
scripts it starts. Each test's line here is the CPU of its worker's process tree over the test
(setup, call and teardown): the worker's own time, what its reaped children used (the kernel
adds a waited-for child's time to its parent, so a finished subprocess is counted), and the
time of every descendant still running. A module-scoped stack's processes are counted while
they run, so a module's total is its cost; a process that leaves the tree before it is reaped
(one reparented when its parent is killed first) is not counted.

``.venv/bin/python -m pytest -n 4 -p tests.cpu_accounting --cpu-log=var/test-cpu.jsonl`` writes
one JSON line per test (each worker appends its own); ``python -m tests.cpu_accounting
var/test-cpu.jsonl`` prints the modules by CPU, then the costliest tests (``make test-cpu`` does
both). The plugin is named with ``-p``, not by the root conftest: an xdist worker parses its
options before it reads the conftest, and refused ``--cpu-log`` there. The option is written as
one ``--cpu-log=PATH`` word: as two words naming a path outside the checkout, the workers ran
without the checkout's ini (pytest warned of its markers as unknown).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import IO

import psutil
import pytest

_log: IO[str] | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-log", metavar="PATH", default=None,
                     help="append each test's CPU seconds (its processes included) to PATH")


def pytest_configure(config: pytest.Config) -> None:
    global _log
    path = config.getoption("--cpu-log")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        _log = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the whole session


def pytest_unconfigure(config: pytest.Config) -> None:
    global _log
    if _log is not None:
        _log.close()
        _log = None


def tree_cpu(process: psutil.Process) -> float:
    """CPU seconds of ``process``, of its reaped children and of its live descendants."""
    total = 0.0
    for member in (process, *process.children(recursive=True)):
        try:
            times = member.cpu_times()
        except psutil.Error:  # a child ended between the listing and now: its parent reaps it
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    if _log is None:
        yield
        return
    me = psutil.Process(os.getpid())
    cpu, wall = tree_cpu(me), time.monotonic()
    yield
    line = {"test": item.nodeid, "cpu": round(tree_cpu(me) - cpu, 3),
            "wall": round(time.monotonic() - wall, 3)}
    _log.write(json.dumps(line) + "\n")
    _log.flush()


def summary(lines: list[dict[str, float | str]], top: int = 25) -> str:
    """Modules by CPU (with their wall time and share), then the ``top`` costliest tests."""
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for line in lines:
        entry = modules[str(line["test"]).split("::")[0]]
        entry[0] += float(line["cpu"])
        entry[1] += float(line["wall"])
        entry[2] += 1
    total = sum(entry[0] for entry in modules.values()) or 1.0
    out = [f"{total:,.0f} CPU-s in {len(lines)} tests", "",
           f"{'CPU-s':>8} {'wall s':>8} {'tests':>5} {'share':>6}  module"]
    for name, (cpu, wall, count) in sorted(modules.items(), key=lambda kv: -kv[1][0]):
        out.append(f"{cpu:8.1f} {wall:8.1f} {count:5d} {100 * cpu / total:5.1f}%  {name}")
    out += ["", f"{'CPU-s':>8} {'wall s':>8}  test"]
    for line in sorted(lines, key=lambda entry: -float(entry["cpu"]))[:top]:
        out.append(f"{float(line['cpu']):8.1f} {float(line['wall']):8.1f}  {line['test']}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description="Summarise a --cpu-log file.")
    parser.add_argument("log", type=Path)
    parser.add_argument("--top", type=int, default=25, help="costliest tests to list")
    args = parser.parse_args()
    lines = [json.loads(text) for text in args.log.read_text().splitlines() if text.strip()]
    print(summary(lines, args.top))


if __name__ == "__main__":
    main()
