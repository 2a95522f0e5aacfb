"""A dry run whose worker vanished is failed with a reason, never left queued (issue 33).

The worker posts ``alive`` when it starts a dry run and while it samples; the scheduler's check
(``check_dry_runs``) fails a started dry run silent for ``lost_after_seconds``. The live drill
(tests/integration/test_dry_run_worker_lost.py) kills a real worker; here each rule is pinned
with a real database and the clock given to the check.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.dryruns.lost import check_dry_runs
from app.dryruns.models import DryRun
from app.runs.service import hash_token
from tests.conftest import tiny_spec

LIMIT = 120.0  # lost_after_seconds' default


def stored_dry_run() -> tuple[int, str]:
    """A queued dry run (no broker involved) and the ticket its task message would carry."""
    ticket = secrets.token_urlsafe(32)
    with get_sessionmaker()() as db:
        dry = DryRun(spec=tiny_spec(name="dry"), status="queued", ticket_hash=hash_token(ticket))
        db.add(dry)
        db.commit()
        return dry.id, ticket


def alive(client: TestClient, dry_id: int, ticket: str) -> int:
    return client.post(f"/api/dry-runs/{dry_id}/alive", json={"worker": "gpu-box-2"},
                       headers={"Authorization": f"Bearer {ticket}"}).status_code


def later(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def test_a_started_dry_run_whose_worker_went_silent_is_failed_with_the_reason(
        client: TestClient) -> None:
    dry_id, ticket = stored_dry_run()
    assert alive(client, dry_id, ticket) == 204
    body = client.get(f"/api/dry-runs/{dry_id}").json()
    assert body["worker"] == "gpu-box-2" and body["started_at"] and body["status"] == "queued"
    assert check_dry_runs(now=later(LIMIT / 2)) == 0  # silent, but not for long
    assert client.get(f"/api/dry-runs/{dry_id}").json()["status"] == "queued"
    assert check_dry_runs(now=later(LIMIT + 30)) == 1
    body = client.get(f"/api/dry-runs/{dry_id}").json()
    assert body["status"] == "failed" and body["finished_at"]
    assert body["error"].startswith("worker lost: worker gpu-box-2 gave no sign of life")
    page = client.get(f"/dry-runs/{dry_id}").text
    assert "worker lost: worker gpu-box-2" in page and 'id="dry-run-error"' in page
    assert "Sampling and scoring on a worker" not in page


def test_a_lost_dry_run_refuses_its_redelivered_message_and_late_result(
        client: TestClient) -> None:
    dry_id, ticket = stored_dry_run()
    assert alive(client, dry_id, ticket) == 204
    assert check_dry_runs(now=later(LIMIT + 30)) == 1
    assert alive(client, dry_id, ticket) == 401  # the redelivered message samples nothing
    late = client.post(f"/api/dry-runs/{dry_id}/result", json={"groups": []},
                       headers={"Authorization": f"Bearer {ticket}"})
    assert late.status_code == 401
    assert check_dry_runs(now=later(3 * LIMIT)) == 0  # failed once


def test_pings_keep_it_alive_and_an_unstarted_one_waits_for_a_worker(
        client: TestClient) -> None:
    sampling, ticket = stored_dry_run()
    waiting, _ = stored_dry_run()
    assert alive(client, sampling, ticket) == 204
    with get_sessionmaker()() as db:  # started long ago ...
        dry = db.get(DryRun, sampling)
        assert dry is not None
        dry.started_at = dry.last_seen_at = later(-3 * LIMIT)
        db.commit()
    assert alive(client, sampling, ticket) == 204  # ... and sampling still: a ping just now
    assert check_dry_runs(now=later(LIMIT - 10)) == 0
    assert client.get(f"/api/dry-runs/{sampling}").json()["status"] == "queued"
    assert client.get(f"/api/dry-runs/{waiting}").json()["status"] == "queued"


def test_silence_while_the_web_app_was_down_is_not_the_workers_fault(
        client: TestClient) -> None:
    dry_id, ticket = stored_dry_run()
    assert alive(client, dry_id, ticket) == 204
    back = later(LIMIT)  # the web app came back then: pings could not arrive before
    assert check_dry_runs(now=later(LIMIT + 30), since=back) == 0
    assert check_dry_runs(now=back + timedelta(seconds=LIMIT + 1), since=back) == 1


def test_a_wrong_ticket_cannot_keep_a_dry_run_alive(client: TestClient) -> None:
    dry_id, _ = stored_dry_run()
    assert alive(client, dry_id, "not-the-ticket") == 401
    assert client.get(f"/api/dry-runs/{dry_id}").json()["started_at"] is None
