"""Fixtures for in-process app tests: a TestClient on a migrated database, and runs in it as a
worker sees them (created with their token, queued or claimed)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.core.db import get_engine, get_sessionmaker
from app.ingest import pipeline
from app.runs import service
from app.runs.service import get_run_for_update
from grpodeck.contract.spec import RunSpec
from tests.conftest import tiny_spec

SPEC = tiny_spec(name="api-run", max_steps=5)


@pytest.fixture
def client(app_db: str) -> TestClient:
    from app.auth import throttle
    from app.main import create_app

    throttle.reset()  # failed sign-ins are counted per process: each test starts from none
    # A loopback address, as `grpodeck serve` binds by default: development mode (no login)
    # while no account exists. tests/app/test_auth.py covers the logged-in mode.
    return TestClient(create_app(), base_url="http://127.0.0.1")


def queued_run(spec: dict | None = None, **overrides: Any) -> tuple[int, str]:  # type: ignore[type-arg]
    """A stored queued run (no broker involved) and its claim ticket (what the task message
    carries)."""
    with get_sessionmaker()() as db:
        run, ticket = service.create_run(
            db, spec=RunSpec.model_validate({**(spec or SPEC), **overrides}))
        db.commit()
        return run.id, ticket


def claim(client: TestClient, run_id: int, ticket: str) -> dict[str, str]:
    """Claim as a worker does; returns the run token's Authorization header."""
    reply = client.post(f"/api/runs/{run_id}/claim", json={"pid": 1, "host": "test"},
                        headers={"Authorization": f"Bearer {ticket}"})
    assert reply.status_code == 200, reply.text
    return {"Authorization": f"Bearer {reply.json()['token']}"}


def running_run(client: TestClient, spec: dict | None = None,  # type: ignore[type-arg]
                **overrides: Any) -> tuple[int, dict[str, str]]:
    """A run a worker has claimed, ready to receive metrics: (id, the worker's headers)."""
    run_id, ticket = queued_run(spec, **overrides)
    return run_id, claim(client, run_id, ticket)


@pytest.fixture
def running(client: TestClient) -> tuple[int, dict[str, str]]:
    """One running run: (id, the worker's headers)."""
    return running_run(client)


def html(text: str) -> BeautifulSoup:
    return BeautifulSoup(text, "html.parser")


def one(text: str, selector: str) -> Tag:
    """The single element ``selector`` matches in a page (fails when there are none or many)."""
    found = html(text).select(selector)
    assert len(found) == 1, f"{selector!r} matched {len(found)} elements"
    return found[0]


def receive(run_id: int, rows: list[tuple[int, dict[str, float]]]) -> None:
    """Store rows through the ingest pipeline (what the report API calls), 5,000 at a time."""
    for i in range(0, len(rows), 5_000):
        with get_sessionmaker()() as db:
            run = get_run_for_update(db, run_id)
            assert run is not None
            pipeline.receive(db, run, rows[i:i + 5_000])
            db.commit()


METRIC_TABLES = re.compile(r"\b(metric_chunks|metric_rollups)\b")


def _plan_rows(plan: dict[str, Any]) -> int:
    """Rows a PostgreSQL plan node (and those under it) read from the metric tables."""
    own = (plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
           if METRIC_TABLES.fullmatch(plan.get("Relation Name", "")) else 0)
    return own + sum(_plan_rows(p) for p in plan.get("Plans", []))


@contextmanager
def metric_rows_read() -> Iterator[list[int]]:
    """Rows the app reads from metric_chunks and metric_rollups inside the block (one number per
    SELECT). SQLite: every statement the connection runs (its trace, which also sees the raw
    cursor ``load_series`` uses), re-counted afterwards; PostgreSQL: every statement SQLAlchemy
    sends, re-run under EXPLAIN ANALYZE for the rows each scan of those tables produced."""
    engine = get_engine()
    seen: list[tuple[str, Any]] = []

    def traced(sql: str) -> None:
        seen.append((sql, None))

    def checkout(dbapi_connection, record, proxy) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.set_trace_callback(traced)

    def checkin(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.set_trace_callback(None)

    def sent(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        seen.append((statement, parameters))

    sqlite = engine.dialect.name == "sqlite"
    hooks = [("checkout", checkout), ("checkin", checkin)] if sqlite else [
        ("before_cursor_execute", sent)]
    for name, hook in hooks:
        event.listen(engine, name, hook)
    counts: list[int] = []
    try:
        yield counts
    finally:
        for name, hook in hooks:
            event.remove(engine, name, hook)
    reads = [(sql, params) for sql, params in seen
             if sql.lstrip().upper().startswith("SELECT") and METRIC_TABLES.search(sql)]
    assert reads, "no read of the metric tables was seen"
    if sqlite:
        with sqlite3.connect(engine.url.database) as db:
            counts += [db.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
                       for sql, _ in reads]
        return
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for sql, params in reads:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            counts.append(_plan_rows(cursor.fetchone()[0][0]["Plan"]))
    finally:
        raw.close()
