"""What a request costs besides its own work: trips to the thread pool, and sessions that must
end however the route left them (``app.core.db.get_db``, ``checkpoint_wal``).

Why: with one logged step per request (TRL's ``report_to="mlflow"``, a plain loop without the
Sender) the framework's share is most of a request. A sync session dependency took two extra
trips to the thread pool (open, then close) and the WAL checkpoint a third after every batch:
~20 % of a one-step request's server CPU (bench/ingest.py, py-spy).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from fastapi.testclient import TestClient

from app.core import db as db_module
from app.core.db import get_engine
from tests.app.conftest import running_run

STEP = {"train/loss": 0.5, "train/reward": 1.0}


def _trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count every trip to the thread pool from now on (Starlette, FastAPI and AnyIO all go
    through ``anyio.to_thread.run_sync``); returns the list the names are appended to."""
    trips: list[str] = []
    real = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        inner = getattr(func, "keywords", {}).get("function") or getattr(func, "func", func)
        trips.append(getattr(inner, "__name__", repr(inner)))  # FastAPI wraps a route in a partial
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return trips


def test_a_report_batch_takes_one_trip_to_the_thread_pool(
        client: TestClient, app_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The work's own trip only (``app.ingest.fast_path.store``: parse, store, commit); the
    session closes with its transaction ended, and a checkpoint that is not due goes nowhere."""
    run_id, headers = running_run(client)
    monkeypatch.setattr(db_module, "_last_checkpoint", [time.monotonic() + 3600])  # not due
    trips = _trips(monkeypatch)
    reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                        json={"rows": [{"step": 1, "metrics": STEP}]})
    assert reply.status_code == 200, reply.text
    assert trips == ["store"], trips
    if app_db.startswith("sqlite"):  # a due checkpoint is one more trip, after the reply
        monkeypatch.setattr(db_module, "_last_checkpoint", [0.0])
        trips.clear()
        client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                    json={"rows": [{"step": 2, "metrics": STEP}]}).raise_for_status()
        assert trips == ["store", "_checkpoint"], trips


def test_every_session_gives_its_connection_back_however_the_route_left_it(
        client: TestClient) -> None:
    """Reads that leave their transaction open (closed in the thread pool), committed writes
    and refused ones (a 409, a 404) all end with no connection checked out of the pool."""
    run_id, headers = running_run(client)
    for step in range(1, 6):
        assert client.get(f"/runs/{run_id}").status_code == 200
        assert client.get(f"/api/runs/{run_id}").status_code == 200
        assert client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                           json={"rows": [{"step": step, "metrics": STEP}]}).status_code == 200
        assert client.post(f"/api/runs/{run_id + 999}/metrics", headers=headers,
                           json={"rows": []}).status_code == 404
    assert get_engine().pool.checkedout() == 0
    ended = client.post(f"/api/runs/{run_id}/finished", headers=headers, json={"returncode": 0})
    assert ended.status_code == 200, ended.text
    refused = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                          json={"rows": [{"step": 9, "metrics": STEP}]})
    assert refused.status_code in (401, 409), refused.text
    assert get_engine().pool.checkedout() == 0


def test_an_mlflow_logged_step_takes_one_trip_to_the_thread_pool(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Who calls (an API key, or development mode: the database) and the route's work, on the
    fast path's one trip (``app.mlflow.api.fast_log_batch``): the reply is MLflow's JSON."""
    from tests.app.test_mlflow_api import API, new_run

    run_id = new_run(client)
    monkeypatch.setattr(db_module, "_last_checkpoint", [time.monotonic() + 3600])  # not due
    trips = _trips(monkeypatch)
    logged = client.post(f"{API}/runs/log-batch", json={"run_id": run_id, "metrics": [
        {"key": "loss", "value": 0.5, "timestamp": 1, "step": 1}]})
    assert logged.status_code == 200, logged.text
    assert logged.json() == {}
    assert trips == ["store"], trips
