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


def running_run(client: TestClient) -> tuple[int, dict[str, str]]:
    with get_sessionmaker()() as db:
        run, token = service.create_run(db, spec=RunSpec.model_validate(SPEC))
        db.commit()
    headers = {"Authorization": f"Bearer {token}"}
    assert client.post(f"/api/runs/{run.id}/started", json={"pid": 1}, headers=headers).status_code == 200
    return run.id, headers


