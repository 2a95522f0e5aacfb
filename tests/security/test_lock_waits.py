"""Issue 22 point 5: a database lock held by someone else is "busy, retry" (503 + Retry-After),
never a 500 that a plain-HTTP reporter drops its batch on, and the reporters retry it.

In-process on both backends (another connection holds the lock: SQLite ``BEGIN EXCLUSIVE``,
PostgreSQL ``LOCK TABLE``), and live: a separate process holds SQLite's exclusive lock for 20 s
while the real Sender reports to a real uvicorn; every server answer is counted."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from app.core import config, db
from grpodeck.client.sender import Sender, Target
from tests.app.conftest import running_run
from tests.integration.conftest import live_stack

ROW = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}


@pytest.fixture
def short_lock_wait(app_db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A request waits 1 s for someone else's lock (10 s by default) before the 503."""
    monkeypatch.setenv("GRPODECK_DATABASE_LOCK_TIMEOUT_SECONDS", "1")
    for cached in (config.get_settings, db.get_engine, db.get_sessionmaker):
        cached.cache_clear()
    return app_db


@contextmanager
def held_lock(database_url: str) -> Iterator[None]:
    """Another connection (not the app's) holds the write lock until the block ends."""
    if database_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(database_url.split("///", 1)[1], isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
    else:
        conn = psycopg.connect(database_url.replace("postgresql+psycopg", "postgresql"))
        conn.execute("LOCK TABLE runs IN EXCLUSIVE MODE")
    try:
        yield
    finally:
        conn.rollback()
        conn.close()


def test_a_held_lock_is_503_with_retry_after_and_the_retry_is_stored(
        short_lock_wait: str, client: TestClient) -> None:
    run_id, headers = running_run(client)
    with held_lock(short_lock_wait):
        busy = client.post(f"/api/runs/{run_id}/metrics", json=ROW, headers=headers)
        ended = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0},
                            headers=headers)
    for reply in (busy, ended):
        assert reply.status_code == 503, reply.text
        assert int(reply.headers["Retry-After"]) > 0
        assert "busy" in reply.json()["detail"]
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}  # nothing half-stored
    again = client.post(f"/api/runs/{run_id}/metrics", json=ROW, headers=headers)
    assert again.status_code == 200, again.text
    assert client.get(f"/api/runs/{run_id}/metrics").json()["reward"]["steps"] == [1]
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"


LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.rollback()
"""


@pytest.fixture(scope="module")
def deck(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    # A request waits 2 s for the lock (10 s by default): the 20 s lock then outlasts any
    # chain of waits (the settler's pass, then a batch), so a batch posted while it is held is
    # answered 503, never let through at the lock's release (seen once in CI with 10 s).
    with live_stack("embedded", tmp_path_factory.mktemp("locked-deck"),
                    extra_env={"GRPODECK_DATABASE_LOCK_TIMEOUT_SECONDS": "2"}) as live:
        yield live


def test_a_reporter_loses_nothing_while_another_process_holds_the_lock_20_s(
        deck, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    made = httpx.post(f"{deck.url}/api/runs", json={"source": "external", "name": "locked"})
    assert made.status_code == 201, made.text
    run = made.json()
    answers: Counter[int] = Counter()
    sender = Sender(Target(deck.url, run["id"], run["token"]), tmp_path / "spool.jsonl",
                    flush_seconds=0.5, timeout=30)  # long enough to hear the 503 itself
    sender._http.event_hooks = {"response": [lambda r: answers.update([r.status_code])]}
    sender.start()
    step = 0

    def report(rows: int) -> None:
        nonlocal step
        for _ in range(rows):
            step += 1
            sender.put_rows([{"step": step, "metrics": {"reward": step / 100, "loss": 1.0}}])
            time.sleep(0.05)

    report(20)
    database = deck.database_url.split("///", 1)[1]
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, database, "20"],
                              stdout=subprocess.PIPE, text=True)
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
    while locker.poll() is None:  # rows keep coming the whole time the lock is held
        report(5)
    assert locker.returncode == 0
    report(20)
    assert sender.close(deadline=120), sender.state
    sender.shutdown()
    stored = httpx.get(f"{deck.url}/api/runs/{run['id']}/metrics").json()
    assert stored["reward"]["steps"] == list(range(1, step + 1))  # 0 rows lost
    assert stored["loss"]["steps"] == list(range(1, step + 1))
    assert answers[503] >= 1, answers  # the lock was really met...
    assert set(answers) <= {200, 503}, answers  # ...and answered busy, never another 5xx
    assert sender.state.rows_dropped == 0


def test_the_workers_run_client_waits_out_a_held_lock(deck) -> None:  # type: ignore[no-untyped-def]
    """The worker's own calls (metrics replay, the run's end) retry the 503 until stored."""
    from worker.run_client import RunClient

    made = httpx.post(f"{deck.url}/api/runs", json={"source": "external", "name": "locked-w"})
    run = made.json()
    client = RunClient(deck.url, run["id"], deadline=120, timeout=30)
    client._http.headers["Authorization"] = f"Bearer {run['token']}"
    answers: Counter[int] = Counter()
    client._http.event_hooks = {"response": [lambda r: answers.update([r.status_code])]}
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, deck.database_url.split("///")[1],
                               "12"], stdout=subprocess.PIPE, text=True)
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
    client.report([{"step": 1, "metrics": {"reward": 0.5}}])
    client.finished(0, None, None)
    locker.wait(timeout=60)
    client.close()
    assert answers[503] >= 1 and set(answers) <= {200, 503}, answers
    assert httpx.get(f"{deck.url}/api/runs/{run['id']}/metrics").json()["reward"]["steps"] == [1]
    assert httpx.get(f"{deck.url}/api/runs/{run['id']}").json()["status"] == "succeeded"
