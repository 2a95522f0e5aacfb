"""One launch gate behind every entrance: the form, ``POST /api/runs``, ``/api/sweeps``, the
smoke-test and dry-run buttons, the dry-run API, a dry run's "Launch" (either mode) and a smoke
test's full run refuse the same spec for the same reasons and store nothing (issue 55: the
dry-run path checked only alert URLs). The gate resolves alert hosts and asks the workers, so it
runs off the event loop: a slow DNS answer never holds every other request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from html import unescape
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from app.core.db import get_sessionmaker
from app.dryruns.models import DryRun
from app.runs.models import Run
from tests.app.conftest import one, queued_run
from tests.app.test_clone import submitted
from tests.app.test_local_data import _upload, dirs  # noqa: F401  (the fixture)
from tests.conftest import tiny_spec

ROWS = "\n".join(json.dumps({"prompt": f"p{i}", "answer": str(i)}) for i in range(3))
BAD = tiny_spec(name="gate", dataset="qa.jsonl", max_steps=20,
                rewards=[{"name": "unit_tests", "weight": 1.0, "params": {}}])
WHY = "no 'tests' column, which reward unit_tests needs"


def _form(client: TestClient, spec: dict[str, Any]) -> dict[str, str]:
    """What a browser sends for ``spec``: the clone form of a stored run holding it."""
    parent, _ = queued_run(spec)
    return submitted(one(client.get(f"/runs/new?from={parent}").text, "#run-form"))


def _stored_dry_run(spec: dict[str, Any]) -> int:
    with get_sessionmaker()() as db:
        dry = DryRun(spec=spec, status="done")
        db.add(dry)
        db.commit()
        return dry.id


def _smoke_run(spec: dict[str, Any]) -> int:
    run_id, _ = queued_run(spec)
    with get_sessionmaker()() as db:
        db.get(Run, run_id).smoke_full_steps = 40
        db.commit()
    return run_id


Send = Callable[[], Response]


Prepare = Callable[[TestClient, dict[str, Any]], Send]


def _posting_form(path: str) -> Prepare:
    def prepare(c: TestClient, spec: dict[str, Any]) -> Send:
        data = _form(c, spec)
        return lambda: c.post(path, data=data, follow_redirects=False)
    return prepare


def _dry_run_launch(mode: str) -> Prepare:
    def prepare(c: TestClient, spec: dict[str, Any]) -> Send:
        dry_id = _stored_dry_run(spec)
        return lambda: c.post(f"/dry-runs/{dry_id}/launch", data={"mode": mode},
                              follow_redirects=False)
    return prepare


def _full_run(c: TestClient, spec: dict[str, Any]) -> Send:
    smoke_id = _smoke_run(spec)
    return lambda: c.post(f"/runs/{smoke_id}/launch-full", follow_redirects=False)


# each entrance: its setup (a stored parent, dry run or smoke run), then the request
ENTRANCES: dict[str, Prepare] = {
    "form": _posting_form("/runs/new"),
    "api": lambda c, spec: lambda: c.post("/api/runs", json=spec),
    "sweep": lambda c, spec: lambda: c.post("/api/sweeps",
                                            json={"spec": spec, "num_generations": [2, 4]}),
    "smoke form": _posting_form("/runs/smoke"),
    "dry-run form": _posting_form("/dry-runs"),
    "dry-run api": lambda c, spec: lambda: c.post("/api/dry-runs", json=spec),
    "dry run's launch": _dry_run_launch("full"),
    "dry run's smoke": _dry_run_launch("smoke"),
    "smoke's full run": _full_run,
}


def _counts() -> tuple[int, int]:
    with get_sessionmaker()() as db:
        return db.query(Run).count(), db.query(DryRun).count()


@pytest.mark.parametrize("entrance", ENTRANCES)
def test_every_entrance_refuses_what_the_gate_refuses_and_stores_nothing(
        client: TestClient, dirs, entrance: str) -> None:  # noqa: F811
    assert _upload(client, "qa.jsonl", ROWS).status_code == 201
    send = ENTRANCES[entrance](client, BAD)
    before = _counts()
    reply = send()
    assert reply.status_code == 422, (entrance, reply.status_code, reply.text[:300])
    assert WHY in unescape(reply.text), entrance
    assert _counts() == before, f"{entrance} stored something"


ALERTING = tiny_spec(name="alerting", alerts={"urls": ["json://hooks.example.com/deck"]})


@pytest.mark.parametrize("entrance", ["form", "smoke form", "dry-run form", "dry run's launch",
                                      "dry run's smoke"])
def test_async_entrances_run_the_gate_off_the_event_loop(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, entrance: str) -> None:
    """The alert host's DNS look-up (here answered at once, but recorded) never runs on the
    thread of the event loop: a slow resolver would hold every request of the server."""
    from app.alerts import egress

    on_loop: list[bool] = []

    def resolve(host: str) -> list[str]:
        on_loop.append(_loop_running())
        return ["93.184.216.34"]

    monkeypatch.setattr(egress, "resolve", resolve)
    reply = ENTRANCES[entrance](client, ALERTING)()
    assert reply.status_code == 303, (entrance, reply.text[:300])
    assert on_loop and not any(on_loop), f"{entrance}: looked up on the event loop {on_loop}"


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
