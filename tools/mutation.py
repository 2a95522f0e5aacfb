"""Mutation testing of the core with mutmut, one module group at a time, and a score table.

Why per group: mutmut reads one ``[tool.mutmut]`` section, so one run would judge every mutant
with the whole fast suite's stats and share one cache. Here each group gets its own work folder
(``var/mutation/<group>/``: links to the sources, a generated pyproject.toml) whose test
selection is only the test files that guard that group, so a group finishes in minutes on two
cores and its results stay cached until its sources or tests change.

Usage:
  python tools/mutation.py                    # every group, then the table
  python tools/mutation.py ingest lifecycle   # some groups
  python tools/mutation.py --report           # the table from the last runs, no new run
  python tools/mutation.py --survivors ingest # also list surviving mutants by name
  python tools/mutation.py --full diagnostics # all ~2800 mutants, not the sample

Score = killed / mutants checked (timeouts count as killed; "no tests" counts as survived).
Sampled groups (diagnostics: ~2800 mutants, over an hour on two shared cores) run and score
only the mutants whose number ends in 0 (every function with ten or more: about one in ten),
an estimate with a few points of sampling error; --full runs them whole.
Environment: MUTATION_TESTS=DIR takes the tests from DIR instead of ./tests (used to measure
the score of an older test suite against today's code), MUTATION_WORK=DIR keeps the work
folders there instead of var/mutation, MUTATION_JOBS (default 2) is the number of children.
A rerun first tests new mutants, then retests the cached survivors (new tests may kill them).
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("MUTATION_WORK", ROOT / "var" / "mutation")).resolve()
LINKED = ["app", "worker", "alembic.ini", "migrations", "templates", "static", "node_modules"]


@dataclass(frozen=True)
class Group:
    mutate: tuple[str, ...]  # globs of source files, relative to the repo root
    tests: tuple[str, ...]  # globs of test files or folders that guard them
    # SQLite only: a PostgreSQL database per test costs seconds per mutant; the one branch that
    # needs PostgreSQL (ingest's dialect switch) has its own test named ..._on_pg.
    pytest_args: tuple[str, ...] = ("-k", "not postgresql")
    sampled: bool = False  # too big to run whole in bounded time: run a sample unless --full


GROUPS: dict[str, Group] = {
    "lifecycle": Group(("app/runs/lifecycle.py",),
                       ("tests/app/test_lifecycle*.py", "tests/app/test_report_api_status.py",
                        "tests/app/test_run_liveness.py")),
    "ingest": Group(("app/metrics/ingest.py", "app/metrics/inbox.py"),
                    ("tests/app/test_ingest_progress.py", "tests/app/test_api.py",
                     "tests/app/test_inbox.py", "tests/app/test_chart_rollups.py")),
    # the five one-row-at-a-time replays are a third of the folder's time and check nothing
    # the 7- and 10-row batches do not
    "diagnostics": Group(("app/diagnostics/*",), ("tests/diagnostics",), pytest_args=(
        "-k", "not postgresql", *(f"--deselect=tests/diagnostics/test_incremental.py::"
                                  f"test_batches_match_one_shot[1-{s}]"
                                  for s in ("healthy", "stalled", "hack", "blowup", "spikes"))),
        sampled=True),
    "importers": Group(("app/importers/*",), ("tests/importers", "tests/app/test_imports.py")),
    "rewards": Group(("worker/rewards/registry.py",), ("tests/rewards", "tests/app/test_spec.py")),
    "signals": Group(("app/rollouts/signals.py",),
                     ("tests/diagnostics/test_rollout_signals.py",
                      "tests/diagnostics/test_signals*.py", "tests/rewards")),
    "report_api": Group(("app/ingest/report_api.py", "grpodeck/contract/spec.py"),
                        ("tests/app/test_report_api_status.py", "tests/app/test_spec*.py",
                         "tests/app/test_api.py")),
}

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
          34: "skipped", 36: "timeout", 37: "killed", -24: "timeout", 24: "timeout",
          152: "timeout", 255: "timeout", None: "not checked"}


def _tests_root() -> Path:
    return Path(os.environ.get("MUTATION_TESTS", ROOT / "tests")).resolve()


def _expand(patterns: tuple[str, ...]) -> list[str]:
    """Test globs -> existing paths (relative to the work folder, which links ``tests``)."""
    tests = _tests_root()
    out: list[str] = []
    for pattern in patterns:
        rel = pattern.removeprefix("tests/")
        out += sorted("tests/" + str(Path(p).relative_to(tests)) for p in
                      glob.glob(str(tests / rel)))
    return out


def _pyproject(group: Group) -> str:
    base = (ROOT / "pyproject.toml").read_text()
    base = re.sub(r"\n\[tool\.mutmut\].*?(?=\n\[|\Z)", "", base, flags=re.DOTALL)

    def toml_list(items: list[str] | tuple[str, ...]) -> str:
        return "[" + ", ".join(json.dumps(i) for i in items) + "]"

    return base + (
        "\n[tool.mutmut]\n"
        'source_paths = ["app", "worker"]\n'
        f"only_mutate = {toml_list(group.mutate)}\n"
        f"also_copy = {toml_list(LINKED[2:])}\n"
        f"pytest_add_cli_args = {toml_list(['-p', 'no:cacheprovider', *group.pytest_args])}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(_expand(group.tests))}\n"
    )


def prepare(name: str) -> Path:
    """The group's work folder: fresh links and config, the mutmut cache kept."""
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    for entry in [*LINKED, "tests"]:
        link = work / entry
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)
        link.symlink_to(_tests_root() if entry == "tests" else ROOT / entry)
    (work / "pyproject.toml").write_text(_pyproject(GROUPS[name]))
    return work


SAMPLE = "*__mutmut_*0"


def run(name: str, jobs: int, sample: bool = False) -> int:
    work = prepare(name)
    retest = [k for d in results(name).values() for k, v in d.items()
              if v in ("survived", "no tests")]
    cmd = ["nice", "-n", "10", sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)]
    if sample:  # named mutants are always (re)run: name only what is not yet killed
        cached = {k: v for d in results(name, SAMPLE).values() for k, v in d.items()}
        todo = [k for k, v in cached.items() if v not in ("killed", "timeout")]
        if cached and not todo:
            return 0
        cmd, retest = [*cmd, *(todo or [SAMPLE])], []
    print(f"== {name}: mutating {', '.join(GROUPS[name].mutate)} "
          f"with {' '.join(_expand(GROUPS[name].tests))}", flush=True)
    log = work / "mutmut.log"
    with log.open("w") as out:
        code = subprocess.call(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT)
        if not code and retest:
            code = subprocess.call(cmd + retest, cwd=work, stdout=out, stderr=subprocess.STDOUT)
    if code:
        print(f"   mutmut exited {code}; see {log}")
    return code


def results(name: str, pattern: str = "*") -> dict[str, dict[str, str]]:
    """{source file: {mutant name: status}} from the group's mutmut cache."""
    out: dict[str, dict[str, str]] = {}
    mutants = WORK / name / "mutants"
    for meta in sorted(mutants.glob("**/*.py.meta")):
        keys = json.loads(meta.read_text()).get("exit_code_by_key", {})
        if keys:
            source = str(meta.relative_to(mutants)).removesuffix(".meta")
            out[source] = {k: STATUS.get(v, "suspicious") for k, v in keys.items()
                           if fnmatch.fnmatch(k, pattern)}
    return out


def table(names: list[str], survivors: bool, full: bool = False) -> None:
    print(f"\n{'module':44} {'checked':>7} {'killed':>7} {'survived':>8} {'no tests':>8} "
          f"{'timeout':>7} {'pending':>7} {'score':>6}")
    for name in names:
        pattern = SAMPLE if GROUPS[name].sampled and not full else "*"
        by_file = {k: v for k, v in results(name, pattern).items() if v}
        if not by_file:
            print(f"{name:44} (not run)")
            continue
        rows = list(by_file.items()) + ([(f"[{name}]", {k: v for d in by_file.values()
                                                         for k, v in d.items()})]
                                         if len(by_file) > 1 else [])
        for source, statuses in rows:
            counts = {s: list(statuses.values()).count(s)
                      for s in ("killed", "survived", "no tests", "timeout", "not checked")}
            skipped = list(statuses.values()).count("skipped")
            total = len(statuses) - counts["not checked"] - skipped
            score = (counts["killed"] + counts["timeout"]) / total if total else 0.0
            print(f"{source:44} {total:7} {counts['killed']:7} {counts['survived']:8} "
                  f"{counts['no tests']:8} {counts['timeout']:7} {counts['not checked']:7} "
                  f"{score:6.1%}")
        if survivors:
            for source, statuses in by_file.items():
                for key, status in sorted(statuses.items()):
                    if status in ("survived", "no tests", "suspicious", "not checked"):
                        print(f"    {status:10} {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", help=f"some of: {', '.join(GROUPS)} (default all)")
    parser.add_argument("--report", action="store_true", help="print the table only")
    parser.add_argument("--survivors", action="store_true", help="list surviving mutants")
    parser.add_argument("--full", action="store_true",
                        help="run sampled groups (diagnostics) whole, not one mutant in ten")
    args = parser.parse_args()
    names = args.groups or list(GROUPS)
    unknown = set(names) - set(GROUPS)
    if unknown:
        parser.error(f"unknown group(s) {', '.join(sorted(unknown))}; known: {', '.join(GROUPS)}")
    if not args.report:
        jobs = int(os.environ.get("MUTATION_JOBS", "2"))
        for name in names:
            run(name, jobs, GROUPS[name].sampled and not args.full)
    table(names, args.survivors, full=args.full)


if __name__ == "__main__":
    main()
