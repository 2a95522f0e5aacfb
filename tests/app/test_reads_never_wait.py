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
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.db import begin_write, get_sessionmaker
from app.metrics import rollups
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


def test_at_most_two_chart_reads_run_at_once_the_rest_queue_asleep(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty tabs opening run pages together must not crowd out a batch holding the write
    lock (``rollups.CHART_READS_AT_ONCE``): the third reader waits for a free place."""
    run_id, headers = running_run(client)
    client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                json={"rows": [{"step": s, "metrics": {"reward": s}} for s in range(1, 5)]})
    inside, lock = [0], threading.Lock()
    two_in, third_in, release = threading.Event(), threading.Event(), threading.Event()
    read = rollups.span

    def span(*args: object, **kwargs: object) -> object:  # the first read of a chart
        with lock:
            inside[0] += 1
            (two_in if inside[0] == 2 else third_in if inside[0] > 2 else threading.Event()).set()
        release.wait(30)
        return read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rollups, "span", span)
    with get_sessionmaker()() as db, ThreadPoolExecutor(4) as pool:
        run = db.get(Run, run_id)
        assert run is not None
        db.expunge(run)
        readers = [pool.submit(lambda: _chart(run)) for _ in range(4)]
        try:
            assert two_in.wait(10)
            assert not third_in.wait(1.0), "a third chart read ran beside the two"
        finally:
            release.set()
        assert all(r.result(timeout=30).last_step == 4 for r in readers)
    assert inside[0] == 4


def _chart(run: Run) -> rollups.ChartData:
    with get_sessionmaker()() as db:
        return rollups.chart_data(db, run, 2000)
