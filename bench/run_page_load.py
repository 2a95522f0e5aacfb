"""Server time and bytes of a long run's page, at several run lengths, cold and warm.

Usage: python bench/run_page_load.py [STEPS ...] [--backend sqlite|postgresql]
       (default 1000 10000 100000 steps x 25 metrics)

For each length it fills a fresh run through the real ingest path (points, chart summaries),
then requests the run page over the app (in-process ASGI client, the whole stack: routing,
queries, figures, template), first through a fresh engine ("cold": no pooled connection, and
SQLite's page cache empty; the process itself was warmed on a 10-step run) and then again
("warm", best of 3). It prints
server time, the page's bytes raw and gzipped, the chart-zoom endpoint for a 1% range, and the
ratio of the longest run's time to the shortest's (the goal: flat in the number of steps), and the
compare page of this run next to a 10-step one (warm, best of 3: it reads the same summaries).
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load import METRICS, PG_ADMIN, _database

CHUNK = 2_000  # steps per ingest call while filling


def fill(n_steps: int) -> int:
    """A running run with n_steps x 25 metrics stored by the real pipeline; returns its id."""
    from app.core.db import get_sessionmaker
    from app.ingest import pipeline
    from app.runs import service
    from grpodeck.contract.spec import RunSpec

    with get_sessionmaker()() as db:
        run, _ = service.create_run(db, spec=RunSpec(max_steps=n_steps))
        db.commit()
        run_id = run.id
    for start in range(1, n_steps + 1, CHUNK):
        rows = [(s, {n: math.sin(s / 100 + i) + (5.0 if s % 9973 == 0 else 0.0)
                     for i, n in enumerate(METRICS)})
                for s in range(start, min(start + CHUNK, n_steps + 1))]
        with get_sessionmaker()() as db:
            run = service.get_run_for_update(db, run_id)
            pipeline.receive(db, run, rows, track_progress=False)
            db.commit()
    return run_id


def _fresh_engine() -> None:
    from app.core import db

    db.get_engine().dispose()
    for cached in (db.get_engine, db.get_sessionmaker):
        cached.cache_clear()


def timed(client, url: str) -> tuple[float, int, int]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    reply = client.get(url)
    elapsed = time.perf_counter() - start
    reply.raise_for_status()
    return elapsed, len(reply.content), len(gzip.compress(reply.content, 6))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("steps", nargs="*", type=int, default=[1_000, 10_000, 100_000])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--smoke", action="store_true",
                        help="50 and 200 steps: seconds (tests/test_benches.py)")
    args = parser.parse_args()
    if args.smoke:
        args.steps = [50, 200]
    url, pg_name = _database(args.backend, Path(tempfile.mkdtemp()), "grpodeck_bench_page")
    os.environ["GRPODECK_DATABASE_URL"] = url
    os.environ.setdefault("GRPODECK_AUTH", "off")
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import migrate

    migrate(url)
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    print(f"{args.backend}, {len(METRICS)} metrics per step, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'steps':>8}{'fill s':>8}{'cold ms':>9}{'warm ms':>9}{'KB':>8}{'KB gz':>8}"
          f"{'zoom 1% ms':>12}{'zoom KB':>9}{'compare ms':>12}")
    warm_times: dict[int, float] = {}
    warmup = fill(10)  # the process's first page compiles templates and imports: not data cost
    for _ in range(2):
        timed(client, f"/runs/{warmup}")
    try:
        for n in args.steps:
            t = time.perf_counter()
            run_id = fill(n)
            filled = time.perf_counter() - t
            _fresh_engine()
            cold, size, gz = timed(client, f"/runs/{run_id}")
            warm = min(timed(client, f"/runs/{run_id}")[0] for _ in range(3))
            x0 = n // 2
            zoom, zsize, _ = timed(client, f"/api/runs/{run_id}/chart?x0={x0}&x1={x0 + n // 100}")
            compare = min(timed(client, f"/runs/compare?ids={run_id},{warmup}")[0]
                          for _ in range(3))
            warm_times[n] = warm
            print(f"{n:>8}{filled:>8.1f}{cold * 1e3:>9.0f}{warm * 1e3:>9.0f}{size / 1e3:>8.0f}"
                  f"{gz / 1e3:>8.0f}{zoom * 1e3:>12.0f}{zsize / 1e3:>9.0f}{compare * 1e3:>12.0f}")
        lo, hi = min(warm_times), max(warm_times)
        print(f"warm page time {hi} steps / {lo} steps: {warm_times[hi] / warm_times[lo]:.2f}x")
    finally:
        if pg_name:
            import psycopg

            _fresh_engine()
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
