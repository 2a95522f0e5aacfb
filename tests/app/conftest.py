"""Fixtures for in-process app tests: a TestClient on a migrated database, and runs in it as a
worker sees them (created with their token, queued or claimed)."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs import service
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
