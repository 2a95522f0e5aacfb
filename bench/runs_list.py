"""Time the runs list (`/runs`) with many runs, on SQLite and PostgreSQL.

Usage: python bench/runs_list.py [N_RUNS] [--smoke]   (default 2000; --smoke: 30 runs, the
same path, for tests/test_benches.py). Stores N runs (a tenth tagged, a
few failed, some archived) in fresh databases, then prints the median server time of typical
list requests over 7 repeats: first page, a deep page, each filter, text search, sort by name.
PostgreSQL is skipped when 127.0.0.1:5432 does not answer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REQUESTS = ("/runs", "/runs?page=20", "/runs?status=failed", "/runs?tag=sweep-3",
            "/runs?q=run-01", "/runs?sort=name&page=10", "/runs?model=builtin:tiny-random",
            "/runs?reward=length_target&page=5", "/runs?archived=all&per_page=200")


def fill(count: int) -> None:
    from app.core.db import get_sessionmaker
    from app.runs.models import Run, RunTag
    from tests.conftest import tiny_spec

    with get_sessionmaker()() as db:
        runs = [Run(name=f"run-{i:05d}", spec=tiny_spec(name=f"run-{i:05d}"),
                    status="failed" if i % 50 == 0 else "succeeded", max_steps=20,
                    current_step=20, verdict="healthy", note="baseline" if i % 7 else None)
                for i in range(count)]
        db.add_all(runs)
        db.flush()
        db.add_all(RunTag(run_id=r.id, tag=f"sweep-{r.id % 10}") for r in runs[::10])
        db.commit()


def measure(url: str, count: int) -> dict[str, float]:
    from fastapi.testclient import TestClient

    from app.core import config, db
    from app.main import create_app
    from tests.conftest import migrate

    os.environ["GRPODECK_DATABASE_URL"] = url
    for cached in (config.get_settings, db.get_engine, db.get_sessionmaker):
        cached.cache_clear()
    migrate(url)
    fill(count)
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    out = {}
    for path in REQUESTS:
        times = []
        for _ in range(7):
            start = time.perf_counter()
            reply = client.get(path)
            times.append(time.perf_counter() - start)
            assert reply.status_code == 200, (path, reply.status_code)
        out[path] = statistics.median(times) * 1000
    db.get_engine().dispose()
    return out


def postgres(count: int) -> dict[str, float] | None:
    import psycopg

    from tests.conftest import postgres_database

    try:
        with postgres_database("grpodeck_bench") as url:
            return measure(url, count)
    except psycopg.OperationalError as exc:  # no server: say so and go on with SQLite
        print(f"PostgreSQL skipped: {exc}")
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="?", type=int, default=2000)
    parser.add_argument("--smoke", action="store_true", help="30 runs: seconds")
    args = parser.parse_args()
    count = 30 if args.smoke else args.runs
    import logging

    logging.disable(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["GRPODECK_BROKER_URL"] = f"sqla+sqlite:///{tmp}/broker.db"
        results = {"sqlite": measure(f"sqlite:///{tmp}/bench.db", count)}
    if (pg := postgres(count)) is not None:
        results["postgresql"] = pg
    print(f"runs list with {count} runs: median server time of 7 requests, ms")
    print(f"{'request':45s}" + "".join(f"{b:>12s}" for b in results))
    for path in REQUESTS:
        print(f"{path:45s}" + "".join(f"{results[b][path]:12.1f}" for b in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
