"""The metric store's size on disk, ingest end to end, whole-series reads and a million-step run:
GRPO Deck on SQLite and PostgreSQL beside trackio (in-process, local SQLite) and MLflow
(``sqlite:///`` tracking store), on the same GRPO-shaped data.

Usage: python bench/store_size.py [--steps 100000] [--sizes 2000,100000]
                                  [--backend sqlite|postgresql|both] [--smoke]
       python bench/store_size.py --million [--backend postgresql] [--max-rss-mb 3072]
                                  [--stall-s 180] [--million-steps 1000000]
(--smoke: 300 steps, both backends, trackio and MLflow, in well under a minute, for
tests/test_benches.py: its figures mean nothing, it only proves the path works.)

Data: 30 metrics with the names a TRL GRPO run logs, N steps, values from
``numpy.random.RandomState(SEED)``: noisy float32 curves (what ``tensor.item()`` gives),
integer-valued lengths and token counts, a linear learning-rate schedule, ``frac_reward_zero_std``
in eighths, clip ratios mostly 0. Every contender logs the same values step by step.

What is measured, only through public paths, so that it measures whatever store the Deck has
(no table of the Deck is named here; tables are discovered from ``pg_tables`` / ``dbstat``):

1. bytes on disk per point at ``--steps`` x 30 metrics. The Deck: a fresh database, less the
   size of its empty store (migrated, web app started, then VACUUM FULL / VACUUM), measured once
   every step is readable over HTTP and the web process has gone quiet (store size unchanged
   and < 0.05 s of its CPU in 3 s: the background settle has finished). SQLite: the database
   file + WAL after ``PRAGMA wal_checkpoint(TRUNCATE)``, and after ``VACUUM`` (web app
   stopped); PostgreSQL: ``pg_database_size`` after ingest, after ``VACUUM`` and after
   ``VACUUM FULL`` (web app stopped). Every table's size is listed (``dbstat`` with its indexes;
   ``pg_total_relation_size``: indexes and TOAST included), so one sees which holds what.
   trackio: its project's SQLite file (minus that of a project whose run logged nothing);
   MLflow: its SQLite file (minus its empty vacuumed file), both after a WAL checkpoint.
2. ingest end to end at ``--sizes``: the Deck from ``grpodeck.client.init`` through ``run.log``
   of every step and ``run.finish(timeout=600)`` until ``GET /api/runs/{id}/metrics?names=reward``
   returns all N steps; trackio ``init``, ``log`` per step, ``finish``, then
   ``SQLiteStorage.get_metric_values(project, run, "reward")`` (its dashboard's, CLI's and MCP
   server's read of one metric) returning N; MLflow ``create_run``, ``MlflowClient.log_batch``
   of 990 metrics (33 steps: its limit is 1,000 a call), ``set_terminated``, then
   ``get_metric_history(run, "reward")`` returning N. The Deck server and MLflow's tables exist
   before the clock starts; trackio creates its file inside ``init``. Ratios are points/s.
3. whole-series read of ``reward`` at ``--steps`` (HTTP for the Deck), warm: one read, then the
   median of 5; each contender's series is also compared with what was logged (every step and
   value identical: "as logged").
4. ``--million``: one run of 1,000,000 steps x 30 metrics through the client as fast as
   ``run.log`` returns (the client spools to disk, its sender posts what waits), on one backend;
   every ~2 s ``GET .../metrics?names=reward&after=<last seen>`` gives the stored (readable)
   step count, and ``/proc/<pid>/status`` the web process's VmRSS and VmHWM (uvicorn and its
   children). Printed per 100k steps stored: points/s over that stretch and RSS; at the end how
   long the web process then took to go quiet (the settle still owed) and the store's size, the
   peak RSS, and whether the last 100k's rate was no slower than the first's. ``--max-rss-mb``
   (default 3072) and ``--stall-s`` (no new stored step in that long, default 180) stop the run
   cleanly and say where it was.

The git commit (and whether app/, migrations/ or the client differ from it), the date and the
load average at start and end are printed, so that runs before and after a store change can be
compared. Figures, not a test.

Before: the store of commit 2c95f4c (one row per point in ``metric_points``, plus
``metric_rollups``; steps land in ``metric_inbox`` first). Measured from a ``git archive`` of
2c95f4c in /tmp (the checkout held the chunked store half-written; there the commit line reads
"unknown"), 2026-12-07, 2 shared CPUs, ``nice -n 10``, another engineer's suites running.

- ``python bench/store_size.py`` (100k steps; load 4.48 2.52 1.11 at start, 5.68 5.68 3.82 at
  end; 760 s). Bytes per point at 100k x 30 = 3M points: Deck SQLite 46.6 (140 MB file, 6 MB of
  it free pages; 40.4 after VACUUM), PostgreSQL 214.1 after ingest, 175.5 after VACUUM, 135.3
  after VACUUM FULL; trackio 54.6; MLflow 284.2. Which table: SQLite ``metric_points`` 120 MB,
  ``metric_rollups`` 14 MB; PostgreSQL ``metric_points`` 458 MB (349 MB after VACUUM FULL),
  ``metric_inbox`` 119 MB of dead rows until vacuumed, ``metric_rollups`` 64 MB. Both settled
  (quiet) 3 s after every step was readable.
- ingest end to end, points/s: 2k steps: Deck SQLite 19.6k, PostgreSQL 19.4k (2.8-2.9 s of
  their 3.1 s is ``finish``), trackio 225k, MLflow 6.1k: Deck/trackio 0.09, Deck/MLflow 3.2.
  100k steps: SQLite 89.0k = 0.53x trackio (167k), 15.8x MLflow (5.6k); PostgreSQL 50.0k =
  0.30x trackio, 8.9x MLflow (its ``finish`` waits 52 s of the 60 s for the spool to drain).
- whole-series read, 100k points: Deck SQLite 293 ms, PostgreSQL 322 ms, trackio 1,648 ms,
  MLflow 4,517 ms: the Deck 5.1-5.6x trackio, 14-15x MLflow.
- ``--million --backend postgresql``, twice: no stall (every one of the 1M steps stored) and
  no growth: web RSS 141-147 MB, peak (VmHWM) 148 and 150 MB. Run 1 (load 3.98 at start,
  2.41 at end): 809 s, 37.1k points/s overall, 100k stretches between 27.0k and 52.4k, first
  37.7k, last 35.5k. Run 2 (load 2.11 -> 3.33): 625 s, 48.0k points/s, first 100k 53.4k,
  last 20.9k (falling from 80k at 200k as the database grew); settled 3 s after ``finish``;
  then 6.43 GB more than the empty store = 214.2 bytes/point. The last 100k was slower than
  the first both times.

After: the chunked store (commits 1960083 and 1ab4dee: per-metric zstd chunks, level 1 computed
when drawn, the settler vacuuming the inbox on PostgreSQL), 2026-12-07, load 1.0-1.5:

- 100k steps: bytes per point SQLite 8.0 (4.0 after VACUUM), PostgreSQL 44.6 right after
  ingest (119 MB of the inbox's dead rows: this run predates the inbox vacuum), 6.2 after
  VACUUM; ingest end to end SQLite 269k points/s = 1.03x trackio (262k), PostgreSQL 244k =
  0.93x; at 2k steps 168k (0.64x) and 118k (0.45x); whole series 62 ms (SQLite) and 68 ms
  (PostgreSQL) against trackio's 890 and MLflow's 2,339.
- ``--million --backend postgresql``: 1M steps in 114 s (264k points/s), 100k stretches at
  244k-363k after the first (99.7k, sharing the cores with the client's loop), the last no
  slower than the first; peak web RSS 178 MB; 14.9 bytes a point right after the run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "clients" / "python"))

from bench.load import METRICS as LOAD_METRICS
from bench.load import PG_ADMIN

SEED = 20261209
READS = 5
# The names TRL's GRPOTrainer logs (bench/load.py's 25, plus a second reward function's pair
# and the min/max clip ratios): 30 per step.
METRICS = [*LOAD_METRICS, "rewards/accuracy_reward/mean", "rewards/accuracy_reward/std",
           "clip_ratio/low_min", "clip_ratio/high_max", "rewards/reasoning_format/mean"]
assert len(METRICS) == 30 and len(set(METRICS)) == 30


# ---- data ------------------------------------------------------------------------------------


def grpo_values(rng: np.random.RandomState, first: int, n: int, total: int) -> list[list[float]]:
    """Steps ``first .. first+n-1`` of a ``total``-step run: one row of 30 values per step, in
    ``METRICS`` order (a chunk at a time, so a million steps never sit in memory at once)."""
    s = np.arange(first, first + n, dtype=np.float64)
    t = s / max(total, 1)
    f32 = lambda a: np.asarray(a, dtype=np.float32).astype(np.float64)
    noise = lambda scale: rng.standard_normal(n) * scale
    ints = lambda lo, hi: rng.randint(lo, hi, n).astype(np.float64)
    trend = 1 / (1 + np.exp(-8 * (t - 0.3)))
    mean_len = 180 + 120 * trend + noise(15)
    cols = {
        "loss": f32(0.02 * noise(1)),
        "grad_norm": f32(np.abs(0.4 + noise(0.15))),
        "learning_rate": 1e-6 * (1 - t),
        "num_tokens": np.cumsum(ints(6_000, 12_000)) + (first - 1) * 9_000,
        "epoch": np.round(s / 7_473, 4),
        "step_time": f32(1.2 + np.abs(noise(0.1))),
        "reward": f32(0.2 + 0.6 * trend + noise(0.08)),
        "reward_std": f32(np.abs(0.35 + noise(0.05))),
        "frac_reward_zero_std": ints(0, 9) / 8,
        "rewards/length_target/mean": f32(0.5 * trend + noise(0.05)),
        "rewards/length_target/std": f32(np.abs(0.2 + noise(0.04))),
        "rewards/format/mean": f32(np.clip(0.6 + 0.4 * trend + noise(0.05), 0, 1)),
        "rewards/format/std": f32(np.abs(0.1 + noise(0.03))),
        "completions/mean_length": f32(mean_len),
        "completions/min_length": np.maximum(1, mean_len // 4 + ints(-10, 10)),
        "completions/max_length": np.minimum(512, mean_len * 2 + ints(0, 60)).round(),
        "completions/clipped_ratio": ints(0, 5) / 32,
        "completions/mean_terminated_length": f32(mean_len - np.abs(noise(8))),
        "completions/min_terminated_length": np.maximum(1, mean_len // 4 + ints(-10, 10)),
        "completions/max_terminated_length": np.minimum(511, mean_len * 2 + ints(0, 50)).round(),
        "kl": f32(np.abs(0.002 + 0.05 * t + noise(0.003))),
        "entropy": f32(np.abs(1.1 - 0.5 * t + noise(0.05))),
        "clip_ratio/low_mean": f32(np.where(rng.rand(n) < 0.1, np.abs(noise(0.002)), 0)),
        "clip_ratio/high_mean": f32(np.where(rng.rand(n) < 0.1, np.abs(noise(0.002)), 0)),
        "clip_ratio/region_mean": f32(np.where(rng.rand(n) < 0.15, np.abs(noise(0.003)), 0)),
        "rewards/accuracy_reward/mean": f32(np.clip(0.1 + 0.7 * trend + noise(0.1), 0, 1)),
        "rewards/accuracy_reward/std": f32(np.abs(0.4 + noise(0.05))),
        "clip_ratio/low_min": f32(np.where(rng.rand(n) < 0.05, np.abs(noise(0.001)), 0)),
        "clip_ratio/high_max": f32(np.where(rng.rand(n) < 0.1, np.abs(noise(0.01)), 0)),
        "rewards/reasoning_format/mean": f32(np.clip(0.3 + 0.6 * trend + noise(0.07), 0, 1)),
    }
    return np.column_stack([cols[name] for name in METRICS]).tolist()


def dataset(n: int) -> list[list[float]]:
    return grpo_values(np.random.RandomState(SEED), 1, n, n)


def step_dict(values: list[float]) -> dict[str, float]:
    return dict(zip(METRICS, values, strict=True))


# ---- small helpers ---------------------------------------------------------------------------


def git_commit() -> str:
    """HEAD, and whether the code measured differs from it (``--no-optional-locks``: never
    take the index lock of a checkout others are working in)."""
    if not (ROOT / ".git").exists() and "GIT_DIR" not in os.environ:
        return f"unknown ({ROOT} is not a git checkout)"
    git = ["git", "--no-optional-locks"]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "app", "migrations",
                            "clients"], cwd=ROOT, capture_output=True, text=True,
                           check=False).stdout.strip()
    return (head or "unknown") + (
        " (+ uncommitted changes in app/, migrations/ or clients/)" if dirty else "")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def sqlite_files(path: Path) -> int:
    """The database file plus its WAL (the shared-memory index is not data)."""
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def sqlite_checkpoint(path: Path, deadline_s: float = 60) -> None:
    """Move the WAL into the database file and truncate it (a reader elsewhere may make it
    report busy for a moment: try again)."""
    end = time.monotonic() + deadline_s
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        while True:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy or time.monotonic() > end:
                return
            time.sleep(0.2)


def sqlite_tables(path: Path) -> dict[str, int]:
    """Bytes per table of any SQLite file, its indexes counted with it (``dbstat``), plus its
    free pages."""
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        rows = conn.execute(
            "SELECT COALESCE(s.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d "
            "LEFT JOIN sqlite_schema s ON s.name = d.name GROUP BY 1").fetchall()
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * \
            conn.execute("PRAGMA page_size").fetchone()[0]
    return {**dict(rows), "(free pages)": free}


def sqlite_vacuum(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path, timeout=60)) as conn:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def proc_status(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes of one process, from /proc/<pid>/status; 0s if it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    kib = lambda key: int(fields.get(key, "0 kB").split()[0]) * 1024
    return kib("VmRSS"), kib("VmHWM")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Series = list[tuple[int, float]]


def timed_read(call: Any, expected: Series, repeats: int = READS) -> tuple[float, bool]:
    """(median seconds of ``repeats`` warm calls, whether the series read is the one logged:
    every step, every value identical)."""
    call()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        got = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), got == expected


def logged_series(data: list[list[float]], name: str = "reward") -> Series:
    at = METRICS.index(name)
    return [(step, values[at]) for step, values in enumerate(data, 1)]


# ---- GRPO Deck -------------------------------------------------------------------------------


class Deck:
    """A fresh, migrated Deck database and a real web app on it (``tests.stack.Stack``: uvicorn
    started as a user starts it), for as long as the context lasts."""

    def __init__(self, backend: str, work: Path) -> None:
        from tests.stack import Stack

        self.backend = backend
        self.work = Path(tempfile.mkdtemp(prefix=f"{backend}-", dir=work))
        self.pg_name: str | None = None
        if backend == "sqlite":
            self.db_path: Path | None = self.work / "grpodeck.db"
            url = f"sqlite:///{self.db_path}"
        else:
            import psycopg

            self.db_path = None
            self.pg_name = f"bench_store_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.pg_name}"')
            url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{self.pg_name}"
        self.stack = Stack(url, f"sqla+sqlite:///{self.work / 'broker.db'}", self.work)
        self.empty_size = 0
        self.empty_tables: dict[str, int] = {}

    @property
    def url(self) -> str:
        return self.stack.url

    def __enter__(self) -> Self:
        try:
            self.stack.migrate()
            self.stack.start_web()
        except BaseException:
            self.__exit__()
            raise
        # The baseline: the empty store compacted (VACUUM FULL / VACUUM), so that no stage of
        # the measurement is credited with the migrations' own dead space.
        self.vacuum(full=True)
        self.empty_size, self.empty_tables = self.size(), self.tables()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_web()
        if self.pg_name:
            import psycopg

            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)')
            self.pg_name = None

    def stop_web(self) -> None:
        self.stack.stop()

    # -- the store from outside --------------------------------------------------------------
    def _pg(self) -> Any:
        import psycopg

        return psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{self.pg_name}",
                               autocommit=True)

    def size(self, checkpoint: bool = True) -> int:
        if self.db_path is not None:
            if checkpoint:
                sqlite_checkpoint(self.db_path)
            return sqlite_files(self.db_path)
        with self._pg() as conn:
            return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    def tables(self) -> dict[str, int]:
        """Every table of the Deck's database (discovered, never named here) -> bytes."""
        if self.db_path is not None:
            return sqlite_tables(self.db_path)
        with self._pg() as conn:
            return {name: int(size) for name, size in conn.execute(
                "SELECT CASE WHEN schemaname = 'public' THEN tablename "
                "ELSE schemaname || '.' || tablename END, "
                "pg_total_relation_size(format('%I.%I', schemaname, tablename)::regclass) "
                "FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")}

    def vacuum(self, full: bool) -> None:
        if self.db_path is not None:
            sqlite_vacuum(self.db_path)  # SQLite has one kind, which rewrites the file
            return
        with self._pg() as conn:
            conn.execute("VACUUM FULL" if full else "VACUUM")

    # -- the web process ----------------------------------------------------------------------
    def web_pids(self) -> list[int]:
        web = self.stack.named["web"]
        try:
            kids = psutil.Process(web.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [web.pid, *(k.pid for k in kids)]

    def rss(self) -> tuple[int, int]:
        """(VmRSS summed, VmHWM summed) of uvicorn and its children, bytes."""
        pairs = [proc_status(pid) for pid in self.web_pids()]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    def web_cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.web_pids())

    def wait_quiet(self, quiet_s: int = 3, deadline_s: float = 900,
                   sample: Callable[[], bool] | None = None) -> tuple[float, str]:
        """(seconds, how) until the web process is idle (< 0.05 s of CPU over ``quiet_s`` 1-s
        samples) with the store's size unchanged over them; or idle for 10 s whatever the size
        does (PostgreSQL's autovacuum may touch files); or the size unchanged for 15 s however
        busy the process (a periodic task of its own). ``sample``: called every second; False
        ends the wait ("stopped")."""
        start = time.monotonic()
        samples: list[tuple[float, int]] = []
        while time.monotonic() - start < deadline_s:
            if sample is not None and not sample():
                return time.monotonic() - start, "stopped"
            samples.append((self.web_cpu(), self.size(checkpoint=False)))
            last, idle, still = samples[-quiet_s - 1:], samples[-11:], samples[-16:]
            waited = time.monotonic() - start
            if len(last) == quiet_s + 1 and last[-1][0] - last[0][0] < 0.05 and \
                    len({s for _, s in last}) == 1:
                return waited, "idle, size unchanged"
            if len(idle) == 11 and idle[-1][0] - idle[0][0] < 0.15:
                return waited, "idle for 10 s, size still moving"
            if len(still) == 16 and len({s for _, s in still}) == 1:
                return waited, "size unchanged for 15 s, process busy"
            time.sleep(1)
        raise TimeoutError(f"the Deck ({self.backend}) never went quiet in {deadline_s} s")

    # -- reads over HTTP -----------------------------------------------------------------------
    def series(self, http: httpx.Client, run_id: int, name: str = "reward",
               after: int | None = None) -> dict[str, list[Any]]:
        params: dict[str, Any] = {"names": name}
        if after is not None:
            params["after"] = after
        reply = http.get(f"/api/runs/{run_id}/metrics", params=params)
        reply.raise_for_status()
        return reply.json().get(name, {"steps": [], "values": []})


@dataclass
class Ingest:
    steps: int
    seconds: float
    parts: dict[str, float] = field(default_factory=dict)
    run: Any = None  # the contender's handle of the run, for the reads

    @property
    def points_per_s(self) -> float:
        return self.steps * len(METRICS) / self.seconds


def deck_ingest(deck: Deck, data: list[list[float]]) -> Ingest:
    """``init`` .. every step readable over HTTP (``metrics?names=reward`` returns all N)."""
    from grpodeck.client import init

    n = len(data)
    start = time.perf_counter()
    run = init(deck.url, f"store-size-{n}", spool_dir=deck.work / "spool", system_metrics=False,
               finish_deadline=600)
    for step, values in enumerate(data, 1):
        run.log(step_dict(values), step=step)
    logged = time.perf_counter()
    status = run.finish(timeout=600)
    finished = time.perf_counter()
    assert status == "succeeded", status
    with httpx.Client(base_url=deck.url, timeout=300) as http:
        deadline = time.monotonic() + 600
        while len(deck.series(http, run.id)["steps"]) != n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run.id}: not all {n} steps readable after 600 s")
            time.sleep(0.1)
    readable = time.perf_counter()
    return Ingest(n, readable - start, {"log loop": logged - start, "finish": finished - logged,
                                        "readable": readable - finished}, run.id)


def deck_read(deck: Deck, run_id: int, expected: Series) -> tuple[float, bool]:
    with httpx.Client(base_url=deck.url, timeout=300) as http:
        def read() -> Series:
            got = deck.series(http, run_id)
            return list(zip(got["steps"], got["values"], strict=True))
        return timed_read(read, expected)


# ---- trackio and MLflow, in-process ----------------------------------------------------------


def trackio_ingest(data: list[list[float]]) -> Ingest:
    import trackio
    from trackio.sqlite_storage import SQLiteStorage

    project, n = f"store-size-{uuid.uuid4().hex[:6]}", len(data)
    start = time.perf_counter()
    trackio.init(project=project, name="run", auto_log_gpu=False, auto_log_cpu=False)
    for step, values in enumerate(data, 1):
        trackio.log(step_dict(values), step=step)
    trackio.finish()
    finished = time.perf_counter()
    got = SQLiteStorage.get_metric_values(project, "run", "reward")
    assert len(got) == n, len(got)
    done = time.perf_counter()
    return Ingest(n, done - start, {"log + finish": finished - start, "read back": done - finished},
                  project)


def trackio_empty() -> int:
    """The file of a trackio project whose run logged nothing (trackio creates it in ``init``,
    inside the timed part, so it is measured on a project of its own)."""
    import trackio
    from trackio.sqlite_storage import SQLiteStorage

    project = f"store-size-empty-{uuid.uuid4().hex[:6]}"
    trackio.init(project=project, name="run", auto_log_gpu=False, auto_log_cpu=False)
    trackio.finish()
    path = SQLiteStorage.get_project_db_path(project)
    sqlite_vacuum(path)
    return sqlite_files(path)


def trackio_size(project: str) -> tuple[int, dict[str, int]]:
    from trackio.sqlite_storage import SQLiteStorage

    path = SQLiteStorage.get_project_db_path(project)
    sqlite_checkpoint(path)
    return sqlite_files(path), sqlite_tables(path)


def trackio_read(project: str, expected: Series) -> tuple[float, bool]:
    from trackio.sqlite_storage import SQLiteStorage

    def read() -> Series:
        return [(r["step"], r["value"])
                for r in SQLiteStorage.get_metric_values(project, "run", "reward")]
    return timed_read(read, expected)


@dataclass
class MlflowStore:
    path: Path
    client: Any
    experiment: str
    empty: int


def mlflow_store(work: Path) -> MlflowStore:
    """A fresh MLflow SQLite tracking store with its tables made (not timed: like the Deck's
    migrated database, it exists before a run starts)."""
    from mlflow.tracking import MlflowClient

    folder = Path(tempfile.mkdtemp(prefix="mlflow-", dir=work))
    path = folder / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{path}")
    experiment = client.create_experiment("store-size",
                                          artifact_location=str(folder / "artifacts"))
    sqlite_vacuum(path)  # as the Deck's baseline: the empty store compacted
    return MlflowStore(path, client, experiment, sqlite_files(path))


def mlflow_ingest(store: MlflowStore, data: list[list[float]]) -> Ingest:
    from mlflow.entities import Metric

    client, n = store.client, len(data)
    per_call = 1000 // len(METRICS)  # MLflow takes at most 1,000 metrics per log_batch
    start = time.perf_counter()
    run_id = client.create_run(store.experiment).info.run_id
    for first in range(0, n, per_call):
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[
            Metric(name, value, now, step)
            for step, values in enumerate(data[first:first + per_call], first + 1)
            for name, value in zip(METRICS, values, strict=True)], synchronous=True)
    client.set_terminated(run_id)
    logged = time.perf_counter()
    got = client.get_metric_history(run_id, "reward")
    assert len(got) == n, len(got)
    done = time.perf_counter()
    return Ingest(n, done - start, {"log_batch + end": logged - start, "read back": done - logged},
                  run_id)


def mlflow_read(store: MlflowStore, run_id: str, expected: Series) -> tuple[float, bool]:
    def read() -> Series:
        return sorted((m.step, m.value)
                      for m in store.client.get_metric_history(run_id, "reward"))
    return timed_read(read, expected)


# ---- modes 1-3 -------------------------------------------------------------------------------


@dataclass
class Figures:
    ingests: dict[tuple[int, str], Ingest] = field(default_factory=dict)  # (steps, contender)
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (bytes, empty)
    tables: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # store -> stage
    reads: dict[str, tuple[float, bool]] = field(default_factory=dict)  # -> (s, identical)
    settled: dict[str, tuple[float, str]] = field(default_factory=dict)  # backend -> quiet


def run_deck(backend: str, sizes: list[int], steps: int, data: list[list[float]], work: Path,
             figures: Figures) -> None:
    for n in sizes:
        with Deck(backend, work) as deck:
            got = deck_ingest(deck, data[:n])
            figures.ingests[(n, f"deck {backend}")] = got
            print(f"  deck {backend}: {n:,} steps end to end {got.seconds:.2f} s "
                  f"({got.points_per_s:,.0f} points/s)", flush=True)
            if n != steps:
                continue
            figures.settled[backend] = deck.wait_quiet()
            label = f"deck {backend}"
            stages = {"empty": deck.empty_tables}
            after = deck.size()
            stages["after ingest"] = deck.tables()
            figures.sizes[f"{label} after ingest"] = (after, deck.empty_size)
            figures.reads[label] = deck_read(deck, got.run, logged_series(data[:n]))
            deck.stop_web()  # nothing else touches the files while they are vacuumed
            deck.vacuum(full=False)
            figures.sizes[f"{label} after VACUUM"] = (deck.size(), deck.empty_size)
            stages["after VACUUM"] = deck.tables()
            if backend == "postgresql":
                deck.vacuum(full=True)
                figures.sizes[f"{label} after VACUUM FULL"] = (deck.size(), deck.empty_size)
                stages["after VACUUM FULL"] = deck.tables()
            figures.tables[label] = stages


def run_trackers(sizes: list[int], steps: int, data: list[list[float]], work: Path,
                 figures: Figures) -> None:
    for n in sizes:
        got = trackio_ingest(data[:n])
        figures.ingests[(n, "trackio")] = got
        print(f"  trackio: {n:,} steps {got.seconds:.2f} s", flush=True)
        if n == steps:
            size, tables = trackio_size(got.run)
            figures.sizes["trackio (its SQLite file)"] = (size, trackio_empty())
            figures.tables["trackio"] = {"after ingest": tables}
            figures.reads["trackio"] = trackio_read(got.run, logged_series(data[:n]))
    for n in sizes:
        store = mlflow_store(work)
        got = mlflow_ingest(store, data[:n])
        figures.ingests[(n, "mlflow")] = got
        print(f"  mlflow: {n:,} steps {got.seconds:.2f} s", flush=True)
        if n == steps:
            sqlite_checkpoint(store.path)
            figures.sizes["mlflow (its SQLite file)"] = (sqlite_files(store.path), store.empty)
            figures.tables["mlflow"] = {"after ingest": sqlite_tables(store.path)}
            figures.reads["mlflow"] = mlflow_read(store, got.run, logged_series(data[:n]))


def report(args: argparse.Namespace, figures: Figures, sizes: list[int]) -> None:
    points = args.steps * len(METRICS)
    print(f"\n== 1. bytes on disk: {args.steps:,} steps x {len(METRICS)} metrics = "
          f"{points:,} points (bytes minus the empty store's, itself vacuumed)")
    print(f"{'store':<42}{'bytes':>16}{'empty':>14}{'bytes/point':>13}")
    per_point: dict[str, float] = {}
    for label, (size, empty) in figures.sizes.items():
        per_point[label] = (size - empty) / points
        print(f"{label:<42}{size:>16,}{empty:>14,}{per_point[label]:>13.1f}")
    for backend, (seconds, how) in figures.settled.items():
        print(f"  deck {backend}: settled {seconds:.1f} s after every step was readable ({how})")
    for store, stages in figures.tables.items():
        names = list(stages)
        final = stages[names[-1]]
        shown = sorted((t for t in set().union(*stages.values())
                        if any(s.get(t, 0) > 65_536 for s in stages.values())
                        or len({s.get(t, 0) for s in stages.values()}) > 1),
                       key=lambda t: -max(s.get(t, 0) for s in stages.values()))
        print(f"\n{store} tables (bytes, indexes included), {' -> '.join(names)}:")
        for table in shown:
            print(f"  {table:<40}" + "".join(f"{stages[s].get(table, 0):>16,}" for s in names))
        print(f"  {'(tables listed / all)':<40}{len(shown):>16} / {len(final)}")
    summary = [f"{k} {v:.1f}" for k, v in per_point.items()]
    print("\nbytes/point: " + ", ".join(summary))

    print(f"\n== 2. ingest end to end (first call .. every step readable), x {len(METRICS)} "
          f"metrics per step")
    print(f"{'steps':>9}  {'contender':<18}{'seconds':>10}{'points/s':>13}"
          f"{'deck/trackio':>14}{'deck/mlflow':>13}  parts (s)")
    for n in sizes:
        theirs = {c: figures.ingests.get((n, c)) for c in ("trackio", "mlflow")}
        for (size, name), got in figures.ingests.items():
            if size != n:
                continue
            ratios = "".join(
                f"{got.points_per_s / other.points_per_s:>{w}.2f}" if other and
                name.startswith("deck") else f"{'':>{w}}"
                for other, w in zip(theirs.values(), (14, 13), strict=True))
            parts = ", ".join(f"{k} {v:.2f}" for k, v in got.parts.items())
            print(f"{n:>9,}  {name:<18}{got.seconds:>10.2f}{got.points_per_s:>13,.0f}"
                  f"{ratios}  {parts}")
    print("(deck/x: the Deck's points/s over x's; above 1 the Deck is faster)")

    print(f"\n== 3. whole-series read: 'reward', {args.steps:,} points, warm, median of {READS}")
    print(f"{'contender':<22}{'ms':>10}{'points/s':>14}{'x trackio':>11}{'x mlflow':>10}"
          f"  as logged")
    for name, (seconds, same) in figures.reads.items():
        vs = "".join(f"{figures.reads[o][0] / seconds:>{w}.2f}" if o in figures.reads
                     else f"{'':>{w}}" for o, w in (("trackio", 11), ("mlflow", 10)))
        print(f"{name:<22}{seconds * 1e3:>10.1f}{args.steps / seconds:>14,.0f}{vs}  {same}")
    print("(x other: how many times faster than the other's read of the same series; as logged:"
          " every step and value identical to what was logged)")


# ---- mode 4: a million steps -----------------------------------------------------------------


def million(args: argparse.Namespace, work: Path) -> None:
    from grpodeck.client import init

    total, window = args.million_steps, max(args.million_steps // 10, 1)
    limit = args.max_rss_mb * 2**20
    stop = threading.Event()
    why: list[str] = []
    marks: list[tuple[int, float, int, int]] = []  # (stored steps, time, rss, hwm) per 100k
    peak = [0]
    with Deck(args.backend, work) as deck:
        print(f"deck {args.backend}: {total:,} steps x {len(METRICS)} metrics; web pid "
              f"{deck.stack.named['web'].pid}, RSS {deck.rss()[0] / 2**20:.0f} MB at start; "
              f"guard {args.max_rss_mb} MB, stall {args.stall_s:.0f} s", flush=True)
        stretch = f"points/s (last {window // 1000}k)" if window >= 1000 else "points/s (last)"
        print(f"{'stored steps':>13}{'elapsed s':>11}{stretch:>22}"
              f"{'points/s (all)':>16}{'RSS MB':>9}{'HWM MB':>9}", flush=True)
        start = time.perf_counter()
        run = init(deck.url, "store-size-million", spool_dir=deck.work / "spool",
                   system_metrics=False, finish_deadline=600)
        stored = [0]

        def watch() -> None:
            last_seen, last_progress = 0, time.monotonic()
            next_mark = window
            marks.append((0, start, *deck.rss()))
            with httpx.Client(base_url=deck.url, timeout=60) as http:
                while not stop.is_set():
                    stop.wait(2.0)
                    try:
                        steps = deck.series(http, run.id, after=last_seen)["steps"]
                    except httpx.HTTPError as exc:
                        steps = []
                        print(f"  poll failed: {exc!r}", flush=True)
                    now = time.perf_counter()
                    rss, hwm = deck.rss()
                    peak[0] = max(peak[0], hwm, rss)
                    if steps:
                        last_seen, last_progress = int(steps[-1]), time.monotonic()
                        stored[0] = last_seen
                    while stored[0] >= next_mark or (stored[0] >= total and
                                                     marks[-1][0] < total):
                        prev = marks[-1]
                        marks.append((stored[0], now, rss, hwm))
                        print(f"{stored[0]:>13,}{now - start:>11.1f}"
                              f"{(stored[0] - prev[0]) * len(METRICS) / (now - prev[1]):>22,.0f}"
                              f"{stored[0] * len(METRICS) / (now - start):>16,.0f}"
                              f"{rss / 2**20:>9.0f}{hwm / 2**20:>9.0f}", flush=True)
                        next_mark = (stored[0] // window + 1) * window
                    if max(rss, hwm) > limit:
                        why.append(f"web RSS {rss / 2**20:.0f} MB (HWM {hwm / 2**20:.0f} MB) "
                                   f"passed --max-rss-mb "
                                   f"{args.max_rss_mb} at {stored[0]:,} stored steps "
                                   f"({now - start:.0f} s)")
                        stop.set()
                    elif time.monotonic() - last_progress > args.stall_s:
                        why.append(f"no new stored step for {args.stall_s:.0f} s at "
                                   f"{stored[0]:,} stored steps ({now - start:.0f} s); web RSS "
                                   f"{rss / 2**20:.0f} MB")
                        stop.set()
                    elif stored[0] >= total:
                        stop.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        rng, logged = np.random.RandomState(SEED), 0
        for first in range(1, total + 1, window):
            chunk = grpo_values(rng, first, min(window, total - first + 1), total)
            for step, values in enumerate(chunk, first):
                if stop.is_set():
                    break
                run.log(step_dict(values), step=step)
                logged = step
            if stop.is_set():
                break
        looped = time.perf_counter() - start
        print(f"  (the client's loop logged {logged:,} steps in {looped:.0f} s; its sender "
              f"delivers from the spool)", flush=True)
        watcher.join()
        status = run.finish(timeout=600 if not why else 5)
        elapsed = time.perf_counter() - start
        rss, hwm = deck.rss()
        peak[0] = max(peak[0], rss, hwm)
        settled = "not waited for (stopped)"
        if not why:  # the settle still owed once every step is readable, and the store's size
            def sample() -> bool:
                rss, hwm = deck.rss()
                peak[0] = max(peak[0], rss, hwm)
                if max(rss, hwm) > limit:
                    why.append(f"web RSS {rss / 2**20:.0f} MB (HWM {hwm / 2**20:.0f} MB) passed "
                               f"--max-rss-mb {args.max_rss_mb} while settling")
                return not why
            try:
                seconds, how = deck.wait_quiet(deadline_s=1800, sample=sample)
                size = deck.size() - deck.empty_size
                settled = (f"{seconds:.0f} s after finish ({how}); store then "
                           f"{size:,} bytes more than empty = "
                           f"{size / max(stored[0] * len(METRICS), 1):.1f} bytes/point "
                           f"(before any VACUUM)")
            except TimeoutError as exc:
                settled = str(exc)
    print(f"\nmillion: {stored[0]:,} of {total:,} steps stored in {elapsed:.0f} s "
          f"({stored[0] * len(METRICS) / elapsed:,.0f} points/s); finish: {status}")
    print(f"web process quiet (settled): {settled}")
    if why:
        print(f"STOPPED: {why[0]}")
    print(f"peak web RSS {peak[0] / 2**20:,.0f} MB (VmHWM, uvicorn + children)")
    full = [(a, b) for a, b in itertools.pairwise(marks) if b[0] - a[0] >= window * 0.5]
    if len(full) >= 2:
        rate = lambda a, b: (b[0] - a[0]) * len(METRICS) / (b[1] - a[1])
        first_rate, last_rate = rate(*full[0]), rate(*full[-1])
        print(f"first {window:,} steps {first_rate:,.0f} points/s, last stretch "
              f"({full[-1][0][0]:,}..{full[-1][1][0]:,}) {last_rate:,.0f} points/s: last no "
              f"slower than first: {last_rate >= first_rate}")
    else:
        print(f"fewer than two stretches of {window:,} steps stored: no first/last comparison")


# ---- the run ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000, help="steps for the size and read")
    parser.add_argument("--sizes", default="2000,100000", help="steps of the ingest runs")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default=None)
    parser.add_argument("--million", action="store_true", help="one 1M-step run (one backend)")
    parser.add_argument("--million-steps", type=int, default=1_000_000)
    parser.add_argument("--max-rss-mb", type=int, default=3072,
                        help="--million: stop when the web process's RSS passes this")
    parser.add_argument("--stall-s", type=float, default=180,
                        help="--million: stop after this long without a new stored step")
    parser.add_argument("--smoke", action="store_true", help="300 steps, seconds")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (databases, web logs) and say where")
    args = parser.parse_args()
    if args.million:
        args.backend = args.backend or "postgresql"
        if args.backend == "both":
            parser.error("--million runs on one backend: --backend sqlite or postgresql")
    args.backend = args.backend or "both"
    if args.smoke:
        args.steps, args.sizes = 300, "300"
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()} | {args.steps})
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    work = Path(tempfile.mkdtemp(prefix="store-size-"))
    # the web app started for the Deck runs this checkout's code, as the bench process does
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "clients" / "python"), os.environ.get("PYTHONPATH", "")])
    os.environ["TRACKIO_DIR"] = str(work / "trackio")  # read once, when trackio is imported
    started = time.perf_counter()
    print(f"store_size: commit {git_commit()}, {dt.datetime.now().isoformat(timespec='seconds')}, "
          f"{os.cpu_count()} CPUs, load at start {load()}, nice {os.nice(0)}", flush=True)
    cwd = Path.cwd()
    os.chdir(work)  # whatever a tracker writes beside itself stays in the bench's folder
    try:
        if args.million:
            million(args, work)
        else:
            print(f"sizes {sizes}, {args.steps:,} steps measured for size and reads; "
                  f"backends {backends}", flush=True)
            data = dataset(max(sizes))
            figures = Figures()
            for backend in backends:
                run_deck(backend, sizes, args.steps, data, work, figures)
            run_trackers(sizes, args.steps, data, work, figures)
            report(args, figures, sizes)
    finally:
        os.chdir(cwd)
        if args.keep:
            print(f"kept {work}")
        else:
            subprocess.run(["rm", "-rf", str(work)], check=False)
    print(f"\nload at end {load()}; {time.perf_counter() - started:.0f} s in all; "
          f"commit {git_commit()}")


if __name__ == "__main__":
    main()
