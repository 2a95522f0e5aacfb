"""The code sandbox's cost per completion on this machine (not a test).

Runs every HumanEval canonical solution (164 programs: prompt + body + the problem's checks)
and trivial one-liners through ``worker.rewards.code.run_unit_tests``, the same path as the
``unit_tests`` reward, and prints seconds per program and programs per second.
Usage (from the repository root): python -m bench.sandbox_cost [--repeat N] [--smoke]
(--smoke: 4 programs of each kind, the same path; tests/test_benches.py runs it)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

from worker import sandbox
from worker.rewards.code import run_unit_tests
from worker.training.code_datasets import humaneval_problems, humaneval_rows


def measure(label: str, completions: list[str], tests: list[object], setups: list[str]) -> None:
    started, cpu_before = time.perf_counter(), _children_cpu()
    outcomes, seconds = run_unit_tests(completions, tests, setups)
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu_before
    passed = sum(o.score == 1.0 for o in outcomes)
    print(f"{label:28} n={len(completions):4}  passed={passed:4}  "
          f"per program: median {statistics.median(seconds):.3f}s  p95 "
          f"{sorted(seconds)[int(0.95 * (len(seconds) - 1))]:.3f}s  "
          f"batch wall {wall:.2f}s = {wall / len(completions):.3f}s/completion  "
          f"CPU {cpu / len(completions):.3f}s/completion")


def _children_cpu() -> float:
    """User + system CPU seconds of every finished sandbox process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="4 programs of each kind")
    args = parser.parse_args()
    print(f"isolation: {sandbox.isolation().describe()}; {os.cpu_count()} CPUs")
    few = 4 if args.smoke else None
    problems, rows = humaneval_problems()[:few], humaneval_rows()[:few]
    trivial = few or 64
    for _ in range(args.repeat):
        measure("trivial (def f(): return 1)", ["def f():\n    return 1"] * trivial,
                ["assert f() == 1"] * trivial, [""] * trivial)
        measure("HumanEval canonical", [p["prompt"] + p["canonical_solution"] for p in problems],
                [r["tests"] for r in rows], [r["setup"] for r in rows])


if __name__ == "__main__":
    main()
