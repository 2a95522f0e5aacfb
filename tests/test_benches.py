"""Every ``bench/*.py`` runs in its ``--smoke`` mode, the way a user runs it
(``.venv/bin/python bench/X.py --smoke``, a subprocess in the repository root), and must exit 0
having printed its figures.

Why: benches are not tests, so nothing ran them, and ``bench/callback_cost.py`` crashed for
weeks (``DeckCallback.register`` had gone) before anyone noticed (issue 36). Here an API change
that breaks a bench fails the suite. A bench added without an entry in ``BENCHES`` fails too.

The benches start real servers, real PostgreSQL databases, Redis, Celery workers, chromium and
tiny trainings; they share nothing, so the module runs them a few at a time from one fixture
(each test waits for its own, with a deadline) to stay within a few minutes on 2 cores.
tests/conftest.py keeps the module on one xdist worker, like the live-stack folders.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "bench"
PARALLEL = 4  # benches at once: most of a smoke run is waiting on servers and subprocesses
# A hang guard for one bench's smoke run, not a speed check. Inside the suite a smoke run takes
# ~8x its time alone (2026-12-06: callback_cost.py 19 -> 149 s, chart_interaction.py 14 -> 106 s;
# four benches at once beside the rest of the suite on two cores), and scaling.py takes 31 s
# alone: at 420 s its run met the guard once (CI of f62b901, a slow day) though it was working.
DEADLINE_S = 900
REAL_LOGS = "shared/data/real-grpo-logs"

SPOOLED_ALL = (r"stored: 200 metric steps \(all logged: True\), "
               r"200 rollout steps \(all logged: True\)")
# bench file -> (arguments before --smoke, the figures it always prints, as a regex)
BENCHES: dict[str, tuple[list[str], str]] = {
    "callback_cost.py": ([], r"delivered to the Deck: DeckCallback \d+, MetricsReporter \d+"),
    "chart_interaction.py": ([], r"zoom data refetched .* median +[\d.]+ ms"),
    "client_spool.py": ([], SPOOLED_ALL),
    "diagnose_real_logs.py": (["{real_logs}"], r"\d+/\d+ simulated logs agree"),
    "diagnostics_speed.py": ([], r"same verdict/categories: True"),
    "drills.py": ([], r"\| web down 3 s mid-run \| succeeded / succeeded \| (\d+) / \1 \| 0 \| pass"),
    "dry_run_time.py": ([], (r"builtin:tiny-random +1 +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+"
                             r"[\s\S]*warm: first [\d.]+ s .*later median [\d.]+ s")),
    "easy_python_baseline.py": ([], r"mean unit_tests reward [\d.]+"),
    "failing_runs.py": ([], r"short_completions: .*short_completions\.jsonl \([1-9]\d* rows\)"),
    "gpu_check.py": ([], r"GRPO Deck overhead: [-+][\d.]+%"),
    "ingest.py": ([], (r"postgresql: via Sender [\d.]+x trackio; one step per request [\d.]+x"
                      r"[\s\S]*end to end [^\n]* = [\d.]+x trackio log \+ read-back")),
    "lead_time.py": (["{real_logs}"], r"first warning/critical: step"),
    "load.py": ([], r"== postgresql: [\s\S]*all page polls +\d+"),
    "mlflow_compat.py": ([], r"GRPO Deck is [\d.]+x the MLflow server's speed"),
    "run_page_load.py": ([], r"warm page time 200 steps / 50 steps: [\d.]+x"),
    "runs_list.py": ([], r"runs list with 30 runs[\s\S]*/runs\?archived=all\S* +[\d.]+ +[\d.]+"),
    "sandbox_cost.py": ([], r"HumanEval canonical +n= +4 +passed= +4"),
    "scaling.py": (["1"], r"GRPO Deck vs bare at 1 process\(es\): [\d.]+ of bare steps/s"),
    "scaling_train.py": ([], r'SCALING \{.*"train_steps_per_second"'),
    "simulated_logs.py": ([], r"\d+ simulated logs written"),
    "step_time.py": ([], r"builtin:tiny-random +G=4 .*: +[\d.]+ s/step"),
    "store_size.py": ([], (r"bytes/point: deck sqlite after ingest -?[\d.]+, .*deck postgresql "
                           r"after VACUUM FULL -?[\d.]+, trackio .*mlflow .*-?[\d.]+\n"
                           r"[\s\S]*300  deck postgresql +[\d.]+ +[\d,]+ +[\d.]+ +[\d.]+ "
                           r"[\s\S]*\ndeck postgresql +[\d.]+ +[\d,]+ +[\d.]+ +[\d.]+ "
                           r"+(True|False)\n")),
}


def real_logs() -> Path:
    """The shared real GRPO logs (``../shared`` beside the checkout; from a git worktree,
    beside the main checkout). Two benches read them; they are data, never copied here."""
    common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()
    places = [ROOT.parent / REAL_LOGS, *([Path(common).parent.parent / REAL_LOGS] if common
                                         else [])]
    found = next((p for p in places if p.is_dir()), None)
    assert found, f"the real GRPO logs are in none of {places}"
    return found


def command(name: str) -> list[str]:
    args, _ = BENCHES[name]
    logs = str(real_logs()) if "{real_logs}" in args else ""
    return [sys.executable, str(BENCH_DIR / name),
            *(a.replace("{real_logs}", logs) for a in args), "--smoke"]


def percentiles_in_order(stdout: str) -> None:
    """Each timed row (``name p50 p99 max``) reads p50 <= p99 <= max: a percentile computed
    past the slowest call (``statistics.quantiles``' default method on 30 calls) is not one."""
    rows = re.findall(r"^(\S+) +([\d.]+) +([\d.]+) +([\d.]+)$", stdout, re.MULTILINE)
    assert rows, "no timed rows"
    for name, *figures in rows:
        p50, p99, top = map(float, figures)
        assert p50 <= p99 <= top, f"{name}: p50 {p50}, p99 {p99}, max {top}"


# bench file -> a check of its figures beyond the regex
FIGURE_CHECKS = {"callback_cost.py": percentiles_in_order}


def run_bench(name: str) -> subprocess.CompletedProcess[str]:
    """One bench as a user runs it, this checkout first on the path (also for its children)."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "clients" / "python"),
                            os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONUNBUFFERED": "1"}
    try:
        return subprocess.run(command(name), cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=DEADLINE_S, check=False)
    except subprocess.TimeoutExpired as exc:  # a hung bench fails its test, not the module
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return subprocess.CompletedProcess(exc.cmd, -9, out, f"timed out after {DEADLINE_S} s")


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest
               ) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """The smoke runs of the selected tests' benches (``-k callback`` runs one), started at
    once on a small pool, the slowest first."""
    chosen = {item.callspec.params["name"] for item in request.session.items
              if item.module is sys.modules[__name__] and hasattr(item, "callspec")}
    slow_first = sorted(chosen, key=lambda n: n not in {"scaling.py", "callback_cost.py",
                                                         "drills.py", "mlflow_compat.py"})
    with ThreadPoolExecutor(PARALLEL) as pool:
        yield {name: pool.submit(run_bench, name) for name in slow_first}


def test_every_bench_has_a_smoke_run() -> None:
    """A new bench must come with its smoke line here, or it could rot unnoticed again."""
    assert sorted(p.name for p in BENCH_DIR.glob("*.py")) == sorted(BENCHES)


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_bench_smoke(name: str,
                     smoke_runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    done = smoke_runs[name].result(timeout=DEADLINE_S * len(BENCHES))
    tail = f"\n--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{' '.join(command(name))} exited {done.returncode}{tail}"
    assert re.search(BENCHES[name][1], done.stdout), f"no figures line /{BENCHES[name][1]}/{tail}"
    if name in FIGURE_CHECKS:
        FIGURE_CHECKS[name](done.stdout)
