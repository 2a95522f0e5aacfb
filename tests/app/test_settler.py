"""The background settler (``app/metrics/settler.py``): a served web process keeps live runs'
inboxes spread without a reader, and never queues behind a run that is being written."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import get_sessionmaker
from app.metrics import settler
from app.metrics.models import InboxStep
from app.runs.models import Run
from tests.app.conftest import running_run
from tests.app.test_reads_never_wait import write_locked

DEADLINE_S = 20.0  # "within a second or two" on a quiet machine; this one is shared


def _waiting(run_id: int) -> tuple[int, int | None]:
    """(inbox rows, the run's stale low step)."""
    with get_sessionmaker()() as db:
        rows = db.scalar(select(func.count()).select_from(InboxStep)
                         .where(InboxStep.run_id == run_id)) or 0
        return rows, db.get(Run, run_id).rollups_stale_lo


def assert_settled(run_id: int) -> None:
    """Wait (polling recorded state, bounded by the deadline) until nothing of the run waits."""
    deadline = time.monotonic() + DEADLINE_S
    while _waiting(run_id) != (0, None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _waiting(run_id) == (0, None)


def test_the_settler_spreads_a_batch_with_nobody_reading(client: TestClient) -> None:
    run_id, headers = running_run(client)
    worker = settler.Settler(get_sessionmaker(), every_seconds=60.0)  # only the wake-up helps
    worker.start()
    try:
        rows = [{"step": s, "metrics": {"reward": s / 10}} for s in range(1, 51)]
        assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                           headers=headers).status_code == 200
        assert_settled(run_id)
    finally:
        worker.stop()


def test_the_settler_passes_over_a_run_being_written(client: TestClient, app_db: str) -> None:
    """PostgreSQL: the run's row is locked (a batch being stored): the pass skips it at once
    rather than waiting, and the next pass settles it. (SQLite has one writer for the whole
    database: there the pass waits its turn like any writer.)"""
    if app_db.startswith("sqlite"):
        return
    run_id, headers = running_run(client)
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": [
        {"step": 1, "metrics": {"reward": 0.1}}]}, headers=headers).status_code == 200
    with write_locked(run_id):
        started = time.monotonic()
        assert settler.settle_all(get_sessionmaker()) == 0
        assert time.monotonic() - started < 5.0
    assert settler.settle_all(get_sessionmaker()) == 1
    assert _waiting(run_id) == (0, None)


def test_the_scheduler_settles_when_settle_in_names_it_and_the_web_app_does_not(
        client: TestClient, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``settle_in=scheduler`` (``grpodeck up``, the compose file): the scheduler's loop runs
    the settler, a web process starts none; ``web`` (the default) is the other way round."""
    import threading

    from app import scheduler
    from app.core.config import get_settings

    assert settler.start_here("web", get_sessionmaker(), 0.5, "scheduler") is None
    assert settler.start_here("scheduler", get_sessionmaker(), 0.0, "scheduler") is None
    monkeypatch.setenv("GRPODECK_SETTLE_IN", "scheduler")
    monkeypatch.setenv("GRPODECK_SETTLE_SECONDS", "0.2")
    get_settings.cache_clear()
    run_id, headers = running_run(client)
    rows = [{"step": s, "metrics": {"reward": s / 10}} for s in range(1, 21)]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    assert _waiting(run_id)[0] == 20  # nobody in this process settles
    stop = threading.Event()
    loop = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    loop.start()
    try:
        assert_settled(run_id)
    finally:
        stop.set()
        loop.join(timeout=30)
        get_settings.cache_clear()
    assert not loop.is_alive()


def test_a_settle_pass_on_postgresql_gives_the_inbox_its_space_back(
        client: TestClient, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every step passes through the inbox and is deleted once settled: on PostgreSQL its dead
    rows stayed on disk until autovacuum's next round (45 bytes a point after a 100k-step run,
    bench/store_size.py). A settle pass vacuums it (at most every VACUUM_EVERY_SECONDS)."""
    run_id, headers = running_run(client)
    with get_sessionmaker()() as db:
        postgres = db.get_bind().dialect.name == "postgresql"
    size = "SELECT pg_relation_size('metric_inbox')"
    rows = [{"step": s, "metrics": {f"m{i}": s * 0.001 + i for i in range(30)}}
            for s in range(1, 3_001)]
    for at in range(0, len(rows), 500):
        assert client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                           json={"rows": rows[at:at + 500]}).status_code == 200
    monkeypatch.setattr(settler, "_vacuumed_at", -1e9)  # due
    if not postgres:  # SQLite reuses a deleted row's pages itself: nothing to do
        assert settler.settle_all(get_sessionmaker()) <= 1
        assert settler.vacuum_inbox(get_sessionmaker()().get_bind(), force=True) is False
        return
    with get_sessionmaker()() as db:
        before = db.connection().exec_driver_sql(size).scalar()
    assert before > 500_000  # 3,000 steps of 30 metrics waiting
    assert settler.settle_all(get_sessionmaker()) == 1
    with get_sessionmaker()() as db:
        after = db.connection().exec_driver_sql(size).scalar()
    assert after < before / 10, (before, after)
    assert settler.vacuum_inbox(get_sessionmaker()().get_bind()) is False  # not due again yet
    # a busy pass within the interval leaves its dead rows; the next idle pass takes them
    for at in range(0, len(rows), 500):
        assert client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                           json={"rows": rows[at:at + 500]}).status_code == 200
    assert settler.settle_all(get_sessionmaker()) == 1
    with get_sessionmaker()() as db:
        busy = db.connection().exec_driver_sql(size).scalar()
    assert busy > 500_000
    assert settler.settle_all(get_sessionmaker()) == 0
    with get_sessionmaker()() as db:
        assert db.connection().exec_driver_sql(size).scalar() < busy / 10
