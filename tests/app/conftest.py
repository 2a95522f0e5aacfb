"""Fixtures for in-process app tests: a TestClient on a migrated database."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs import service
from app.runs.spec import RunSpec

SPEC = {"name": "api-run", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "rewards": [{"name": "length_target", "weight": 1.0, "params": {"target": 20}}],
        "num_generations": 4, "max_steps": 5}


@pytest.fixture
def client(app_db: str) -> TestClient:
    from app.main import create_app

    # A loopback address, as `grpodeck serve` binds by default: development mode (no login)
    # while no account exists. tests/app/test_auth.py covers the logged-in mode.
    return TestClient(create_app(), base_url="http://127.0.0.1")


def queued_run(spec: dict | None = None) -> tuple[int, str]:  # type: ignore[type-arg]
    """A stored queued run and its claim ticket (what the task message carries)."""
    with get_sessionmaker()() as db:
        run, ticket = service.create_run(db, spec=RunSpec.model_validate(spec or SPEC))
        db.commit()
        return run.id, ticket


def claim(client: TestClient, run_id: int, ticket: str) -> dict[str, str]:
    """Claim as a worker does; returns the run token's Authorization header."""
    reply = client.post(f"/api/runs/{run_id}/claim", json={"pid": 1, "host": "test"},
                        headers={"Authorization": f"Bearer {ticket}"})
    assert reply.status_code == 200, reply.text
    return {"Authorization": f"Bearer {reply.json()['token']}"}


def running_run(client: TestClient, spec: dict | None = None) -> tuple[int, dict[str, str]]:  # type: ignore[type-arg]
    run_id, ticket = queued_run(spec)
    return run_id, claim(client, run_id, ticket)


