"""Reads never wait for writes: while another connection holds a live run's write lock (what
ingest and the settler hold while they write it), its page, its metrics API and the runs list
still answer, with the steps still waiting in its inbox (``app/metrics/waiting.py``). Before
issue 36 every one of them settled the inbox first, under that lock, and waited for it.

The lock is real: a second session on its own thread runs ``begin_write`` (SQLite's
``BEGIN IMMEDIATE`` and this process's writer hand-over) and ``SELECT ... FOR UPDATE`` of the
run row (PostgreSQL), and keeps the transaction open until the reads are done."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.db import begin_write, get_sessionmaker
from app.runs.models import Run
from tests.app.conftest import running_run

BOUND_S = 5.0  # a read answers within this while the lock is held (it used to wait 30 s)


@contextmanager
def write_locked(run_id: int) -> Iterator[None]:
    """Hold the run's write lock from another connection until the block ends."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with get_sessionmaker()() as db:
            begin_write(db)
            db.scalars(select(Run).where(Run.id == run_id).with_for_update()).one()
            held.set()
            release.wait(120)
            db.rollback()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(30), "the lock holder never got the lock"
    try:
        yield
    finally:
        release.set()
        holder.join(60)


def _read_while_locked(client: TestClient, run_id: int, paths: list[str]) -> dict[str, httpx.Response]:
    replies: dict[str, httpx.Response] = {}
    with write_locked(run_id), ThreadPoolExecutor(1) as pool:
        for path in paths:
            future = pool.submit(client.get, path)
            try:
                replies[path] = future.result(timeout=BOUND_S)
            except TimeoutError:
                raise AssertionError(f"GET {path} waited for the run's write lock "
                                     f"(no answer within {BOUND_S} s)") from None
    return replies


def test_a_live_runs_page_api_and_the_runs_list_answer_while_its_write_lock_is_held(
        client: TestClient) -> None:
    run_id, headers = running_run(client)
    rows = [{"step": s, "metrics": {"reward": s / 10, "kl": 0.01 * s}} for s in range(1, 6)]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200  # waiting in the inbox, unsettled
    paths = [f"/runs/{run_id}", f"/api/runs/{run_id}/metrics", f"/api/runs/{run_id}/chart",
             f"/runs/{run_id}/_summaries", "/runs", "/runs/_table", "/runs?sort=reward",
             "/runs/_table?sort=kl&dir=asc", "/api/runs?sort=best"]
    replies = _read_while_locked(client, run_id, paths)
    for path, reply in replies.items():
        assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])
    assert replies[f"/api/runs/{run_id}/metrics"].json()["reward"]["steps"] == [1, 2, 3, 4, 5]
    assert replies[f"/api/runs/{run_id}/chart"].json()["last_step"] == 5
    assert "last 0.5 at step 5" in replies[f"/runs/{run_id}/_summaries"].text
