"""Issue 7 load drill, the correctness half (the speed half is bench/load.py): reporters of many
runs at once, each retrying some batches, against a real uvicorn on SQLite and PostgreSQL, with
the lost-run watcher re-diagnosing the same runs all the while. Nothing may fail, and every
point must be stored exactly once with the value sent last."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.config import ROOT
from app.core.db import make_engine
from app.health.models import FindingRecord
from app.runs import service
from app.runs.models import Run
from grpodeck.contract.spec import RunSpec
from tests.conftest import migrate
from tests.settled import point_count, settle, stored_points
from tests.stack import free_port

REPORTERS = 8
BATCHES = 25
STEPS_PER_BATCH = 3
METRICS = [f"m{i}" for i in range(20)] + ["reward", "reward_std", "kl", "entropy", "loss"]


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    """uvicorn started as ``grpodeck serve`` does, its watcher checking every 0.2 s."""
    migrate(database_url)
    port = free_port()
    env = {**os.environ, "GRPODECK_DATABASE_URL": database_url,
           "GRPODECK_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.db'}",
           "GRPODECK_LOST_CHECK_SECONDS": "0.2", "GRPODECK_DIAGNOSTICS_PERSIST_SECONDS": "0.5"}
    log = (tmp_path / "web.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--no-migrate", "--port",
                             str(port)], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            proc.poll()
            assert proc.returncode is None, (tmp_path / "web.log").read_text()
            threading.Event().wait(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _value(run: int, step: int, name: str, attempt: int) -> float:
    return round(math.sin(run + step / 7 + len(name)) + attempt / 1000, 6)


def _report(url: str, run_id: int, token: str, errors: list[str], batches: int = BATCHES,
            steps_per_batch: int = STEPS_PER_BATCH) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for b in range(batches):
            steps = range(1 + b * steps_per_batch, 1 + (b + 1) * steps_per_batch)
            # every third batch is sent twice (a retry after a lost reply), the second time with
            # other values: the second must win and nothing may be duplicated
            for attempt in range(2 if b % 3 == 0 else 1):
                rows = [{"step": s, "metrics": {n: _value(run_id, s, n, attempt) for n in METRICS}}
                        for s in steps]
                response = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows})
                if response.status_code != 200:
                    errors.append(f"run {run_id} batch {b}: {response.status_code} {response.text}")
            beat = client.post(f"/api/runs/{run_id}/metrics", json={"rows": []})
            if beat.status_code != 200:
                errors.append(f"run {run_id} heartbeat: {beat.status_code} {beat.text}")
            control = client.get(f"/api/runs/{run_id}/control")
            if control.status_code != 200:
                errors.append(f"run {run_id} control: {control.status_code}")


# (batches, steps per batch): the live reporter's small batches, and big ones (90 steps x 25
# metrics: PostgreSQL COPYs them straight into the table, a re-sent one takes the staged upsert)
@pytest.mark.parametrize(("batches", "steps_per_batch"), [(BATCHES, STEPS_PER_BATCH), (6, 90)],
                         ids=["small", "big"])
def test_concurrent_reporters_lose_nothing_and_store_each_point_once(
        server: str, database_url: str, batches: int, steps_per_batch: int) -> None:
    engine = make_engine(database_url)
    with Session(engine) as db:
        runs = [service.create_run(db, spec=RunSpec(name=f"c{i}", model="builtin:tiny-random",
                                                     max_steps=1000)) for i in range(REPORTERS)]
        db.commit()
        tickets = [(run.id, ticket) for run, ticket in runs]
    ids = []
    for run_id, ticket in tickets:  # claimed as a worker does: the ticket buys the run token
        response = httpx.post(f"{server}/api/runs/{run_id}/claim", json={"pid": 1},
                              headers={"Authorization": f"Bearer {ticket}"}, timeout=30)
        assert response.status_code == 200, response.text
        ids.append((run_id, response.json()["token"]))
    errors: list[str] = []
    threads = [threading.Thread(target=_report,
                                args=(server, run_id, token, errors, batches, steps_per_batch))
               for run_id, token in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert errors == []
    last_step = batches * steps_per_batch
    with Session(engine) as db:
        settle(db, [run_id for run_id, _ in ids])
        for run_id, _ in ids:
            points = [(s, n, v) for (s, n), (v, _) in stored_points(db, run_id).items()]
            assert point_count(db, run_id) == last_step * len(METRICS)  # once each, none missing
            expected = {(s, n): _value(run_id, s, n, 1 if (s - 1) // steps_per_batch % 3 == 0 else 0)
                        for s in range(1, last_step + 1) for n in METRICS}
            assert {(s, n): v for s, n, v in points} == expected
            run = db.get(Run, run_id)
            assert run is not None and run.status == "running" and run.current_step == last_step
            assert run.diagnostics_revision >= batches  # every batch went through diagnostics
            keys = db.scalar(select(func.count()).select_from(FindingRecord)
                             .where(FindingRecord.run_id == run_id))
            distinct = db.scalar(select(func.count(func.distinct(FindingRecord.category + FindingRecord.metric_key)))
                                 .where(FindingRecord.run_id == run_id))
            assert keys == distinct  # concurrent diagnoses never duplicated a finding
    engine.dispose()


WIDE = 48  # more reporters than the server's request thread pool (40)


def _claimed(server: str, database_url: str, n: int) -> list[tuple[int, str]]:
    engine = make_engine(database_url)
    with Session(engine) as db:
        runs = [service.create_run(db, spec=RunSpec(name=f"w{i}", model="builtin:tiny-random",
                                                     max_steps=1000)) for i in range(n)]
        db.commit()
        tickets = [(run.id, ticket) for run, ticket in runs]
    engine.dispose()
    out = []
    for run_id, ticket in tickets:
        response = httpx.post(f"{server}/api/runs/{run_id}/claim", json={"pid": 1},
                              headers={"Authorization": f"Bearer {ticket}"}, timeout=30)
        assert response.status_code == 200, response.text
        out.append((run_id, response.json()["token"]))
    return out


@pytest.mark.one_backend
def test_more_writers_than_request_threads_are_queued_never_answered_busy(
        server: str, database_url: str) -> None:
    """SQLite, 48 runs posting at the same instant. In-process writers take turns on the write
    lock; no other process holds it, so no answer may be a 503 "busy" (nor a 500 pool timeout).

    The bug this guards: the run was locked in a route dependency, which FastAPI runs on another
    trip to the 40-thread pool than the route; the waiters took every thread, the holder never
    got one for its route, and everything stalled until the 30 s waits ended in 503s/500s."""
    ids = _claimed(server, database_url, WIDE)
    barrier = threading.Barrier(WIDE)
    answers: list[str] = []

    def report(run_id: int, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server, headers=headers, timeout=120) as client:
            for b in range(2):
                rows = [{"step": s, "metrics": {n: _value(run_id, s, n, 0) for n in METRICS}}
                        for s in range(1 + b * 20, 21 + b * 20)]
                barrier.wait(timeout=120)  # every batch round fired at the same instant
                while True:
                    response = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows})
                    if response.status_code != 200:
                        answers.append(f"run {run_id}: {response.status_code} {response.text}")
                    if response.status_code != 503:  # a client retries a 503: count, resend
                        break

    threads = [threading.Thread(target=report, args=pair) for pair in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert answers == []
    engine = make_engine(database_url)
    with Session(engine) as db:
        settle(db, [run_id for run_id, _ in ids])
        counts = {run_id: point_count(db, run_id) for run_id, _ in ids}
    engine.dispose()
    assert counts == {run_id: 40 * len(METRICS) for run_id, _ in ids}
