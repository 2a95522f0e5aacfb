"""Fixtures for in-process app tests: a TestClient on a migrated database, and runs in it as a
worker sees them (created with their token, queued or claimed)."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs import service
from app.runs.spec import RunSpec
from tests.conftest import tiny_spec

SPEC = tiny_spec(name="api-run", max_steps=5)


@pytest.fixture
def client(app_db: str) -> TestClient:
    from app.main import create_app

    return TestClient(create_app())


def queued_run(**overrides: Any) -> tuple[int, dict[str, str]]:
    """A stored, queued run (no broker involved) and the worker's headers for it."""
    with get_sessionmaker()() as db:
        run, token = service.create_run(db, spec=RunSpec.model_validate({**SPEC, **overrides}))
        db.commit()
        return run.id, {"Authorization": f"Bearer {token}"}


def running_run(client: TestClient, **overrides: Any) -> tuple[int, dict[str, str]]:
    """A run a worker has claimed (``/started``), ready to receive metrics."""
    run_id, headers = queued_run(**overrides)
    reply = client.post(f"/api/runs/{run_id}/started", json={"pid": 1}, headers=headers)
    assert reply.status_code == 200, reply.text
    return run_id, headers


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
