"""Heartbeats of the scheduler and the workers: a banner on every page and a failing
``/healthz?strict=1`` once one kind fell silent, nothing for a stack that never ran it, and a
heartbeat endpoint that takes only the deployment's worker secret."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.core import config as config_module
from app.core.db import get_sessionmaker
from app.processes.models import HeartbeatRecord
from app.processes.service import beat
from grpodeck.contract.heartbeat import HEARTBEAT_PATH, Heartbeat
from tests.app.conftest import html

SCHEDULER_DOWN = "alerts are not being delivered"
NO_WORKER = "No worker is running: queued runs and dry runs wait"


def _beat(kind: str, name: str, silent_for: float = 0.0) -> None:
    with get_sessionmaker()() as db:
        beat(db, kind, Heartbeat(name=name, host="h", pid=7))  # type: ignore[arg-type]
        db.execute(update(HeartbeatRecord).where(HeartbeatRecord.name == name).values(
            last_seen_at=datetime.now(UTC) - timedelta(seconds=silent_for)))
        db.commit()


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(f"GRPODECK_{key.upper()}", value)
    config_module.get_settings.cache_clear()


def _banner(client: TestClient) -> str:
    found = html(client.get("/runs").text).select("#process-alerts")
    return found[0].get_text(" ", strip=True) if found else ""


def test_a_silent_scheduler_shows_a_banner_and_fails_strict_healthz(client: TestClient) -> None:
    _beat("scheduler", "scheduler@h", silent_for=120)  # the default limit is 60 s
    _beat("worker", "celery@h")
    banner = _banner(client)
    assert SCHEDULER_DOWN in banner and NO_WORKER not in banner
    assert SCHEDULER_DOWN in html(client.get("/datasets").text).select_one("#process-alerts").text
    plain = client.get("/healthz")  # liveness: the web process answers, whatever else is down
    assert plain.status_code == 200 and plain.json()["processes"]["scheduler"]["stale"] is True
    strict = client.get("/healthz", params={"strict": 1})
    assert strict.status_code == 503 and strict.json()["failing"] == ["scheduler"]
    assert client.get("/healthz", params={"require": "worker"}).status_code == 200
    assert client.get("/healthz", params={"require": "scheduler"}).status_code == 503


def test_every_worker_silent_shows_the_worker_banner(client: TestClient) -> None:
    _beat("worker", "celery@a", silent_for=300)
    _beat("worker", "celery@b", silent_for=90)
    _beat("scheduler", "scheduler@h")
    assert NO_WORKER in _banner(client)
    assert client.get("/healthz", params={"require": "worker"}).status_code == 503


def test_one_live_worker_is_enough(client: TestClient) -> None:
    _beat("worker", "celery@a", silent_for=300)
    _beat("worker", "celery@b")
    assert _banner(client) == ""
    assert client.get("/healthz", params={"require": "worker"}).status_code == 200


def test_a_stack_that_never_ran_a_scheduler_gets_no_banner(client: TestClient) -> None:
    """The browser tests' stacks run workers only: nothing to warn about, but a strict probe
    still refuses (nothing was ever heard from)."""
    assert _banner(client) == ""
    assert client.get("/healthz").status_code == 200
    strict = client.get("/healthz", params={"strict": "true"})
    assert strict.status_code == 503 and strict.json()["failing"] == ["scheduler", "worker"]


def test_an_expected_process_never_heard_from_is_reported(client: TestClient,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _settings(monkeypatch, expect_processes="worker", heartbeat_stale_seconds="0")
    banner = _banner(client)
    assert NO_WORKER in banner and SCHEDULER_DOWN not in banner


def test_healthz_names_an_unknown_kind(client: TestClient) -> None:
    reply = client.get("/healthz", params={"require": "scheduler,gpu"})
    assert reply.status_code == 422 and "gpu" in reply.text


def test_worker_heartbeat_needs_the_secret(client: TestClient,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _settings(monkeypatch, worker_secret="s3cret")
    body = {"name": "celery@gpu1", "host": "gpu1", "pid": 42}
    assert client.post(HEARTBEAT_PATH, json=body).status_code == 401
    wrong = client.post(HEARTBEAT_PATH, json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "GRPODECK_WORKER_SECRET" in wrong.json()["detail"]
    assert client.get("/healthz").json()["processes"]["worker"]["last_seen_at"] is None
    ok = client.post(HEARTBEAT_PATH, json=body, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 204
    assert client.get("/healthz").json()["processes"]["worker"]["last_seen_at"] is not None


def test_without_a_secret_only_this_machine_may_beat(app_db: str) -> None:
    from app.main import create_app

    remote = TestClient(create_app(), base_url="http://deck.example.org")
    reply = remote.post(HEARTBEAT_PATH, json={"name": "celery@x"})
    assert reply.status_code == 401 and "GRPODECK_WORKER_SECRET" in reply.json()["detail"]
    local = TestClient(create_app(), base_url="http://127.0.0.1")
    assert local.post(HEARTBEAT_PATH, json={"name": "celery@x"}).status_code == 204
    bad = local.post(HEARTBEAT_PATH, json={"name": ""})
    assert bad.status_code == 422
