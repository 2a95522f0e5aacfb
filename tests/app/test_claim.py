"""The run token's life (bug 7) and the bounded lost check (bug 5), in-process against real
SQLite and PostgreSQL: a queued run holds only a single-use claim ticket; claiming trades it for
the token exactly once; the token dies with the run; a silent worker is found within the bound,
including one that never sent a metric."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
from fastapi.testclient import TestClient

from app.core.config import get_settings
from app.core.db import get_sessionmaker
from app.ingest.watch import check_live_runs
from app.runs.models import Run
from tests.app.conftest import SPEC, claim, queued_run, running_run
from worker.run_client import RunClient


def _claim(client: TestClient, run_id: int, ticket: str) -> httpx.Response:
    return client.post(f"/api/runs/{run_id}/claim", json={"pid": 1, "host": "h"},
                       headers={"Authorization": f"Bearer {ticket}"})


def test_a_ticket_claims_once_and_is_not_a_token(client: TestClient) -> None:
    run_id, ticket = queued_run()
    body = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}
    as_ticket = {"Authorization": f"Bearer {ticket}"}
    assert client.post(f"/api/runs/{run_id}/metrics", json=body, headers=as_ticket).status_code == 401
    assert _claim(client, run_id, "wrong").status_code == 401
    headers = claim(client, run_id, ticket)
    assert headers["Authorization"] != f"Bearer {ticket}"
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"
    again = _claim(client, run_id, ticket)  # a redelivered message: already claimed
    assert again.status_code == 409 and "token" not in again.text
    assert client.post(f"/api/runs/{run_id}/metrics", json=body, headers=headers).status_code == 200


def test_concurrent_claims_let_exactly_one_worker_win(client: TestClient) -> None:
    run_id, ticket = queued_run()
    with ThreadPoolExecutor(4) as pool:
        codes = sorted(pool.map(lambda _: _claim(client, run_id, ticket).status_code, range(4)))
    assert codes == [200, 409, 409, 409]


def test_a_cancelled_queued_run_cannot_be_claimed(client: TestClient) -> None:
    run_id, ticket = queued_run()
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200
    assert _claim(client, run_id, ticket).status_code == 409
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "cancelled"


def test_the_token_is_revoked_when_the_run_ends(client: TestClient) -> None:
    run_id, headers = running_run(client)
    client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                json={"rows": [{"step": 1, "metrics": {"reward": 0.5}}]})
    done = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert done.json()["status"] == "succeeded"
    late = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                       json={"rows": [{"step": 9, "metrics": {"reward": 1.0}}]})
    assert late.status_code == 401
    assert client.get(f"/api/runs/{run_id}/control", headers=headers).status_code == 401
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {
        "reward": {"steps": [1], "values": [0.5]}}  # the late step 9 was not stored


def test_a_run_that_never_reported_is_failed_within_the_bound(client: TestClient) -> None:
    floor = get_settings().lost_after_seconds
    assert floor <= 300  # minutes, not a quarter of an hour
    run_id, _ = running_run(client)  # claimed, then the worker died before any metric
    now = datetime.now(UTC)
    assert check_live_runs(now + timedelta(seconds=floor - 5)) == 0
    assert check_live_runs(now + timedelta(seconds=floor + 5)) == 1
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "failed" and "worker lost" in run["error"]


def test_control_polls_keep_a_quiet_run_alive(client: TestClient) -> None:
    floor = get_settings().lost_after_seconds
    run_id, headers = running_run(client)
    start = datetime.now(UTC)
    # The supervisor polls control every second while the child loads a big model.
    assert client.get(f"/api/runs/{run_id}/control", headers=headers).status_code == 200
    assert check_live_runs(start + timedelta(seconds=floor - 1)) == 0
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"


def test_silence_while_the_web_app_was_down_is_not_held_against_a_run(client: TestClient) -> None:
    floor = get_settings().lost_after_seconds
    running_run(client)
    restarted = datetime.now(UTC) + timedelta(seconds=2 * floor)  # the web app came back late
    assert check_live_runs(restarted + timedelta(seconds=1), since=restarted) == 0
    assert check_live_runs(restarted + timedelta(seconds=floor + 1), since=restarted) == 1


def test_a_slow_run_gets_three_report_intervals(client: TestClient) -> None:
    floor = get_settings().lost_after_seconds
    run_id, _ = running_run(client, {**SPEC, "logging_steps": 2})
    with get_sessionmaker()() as db:
        db.get(Run, run_id).seconds_per_step = floor  # one report every 2 x floor seconds
        db.commit()
    now = datetime.now(UTC)
    assert check_live_runs(now + timedelta(seconds=5 * floor)) == 0
    assert check_live_runs(now + timedelta(seconds=6 * floor + 5)) == 1


def test_claim_answers_alike_for_a_missing_run_and_a_wrong_ticket(client: TestClient) -> None:
    """The anonymous claim route must not tell a stranger which run ids exist: a wrong ticket
    for a queued, a running and an ended run, and a run that does not exist, all get one answer."""
    queued_id, _ = queued_run()
    running_id, headers = running_run(client)
    client.post(f"/api/runs/{running_id}/finished", json={"returncode": 0}, headers=headers)
    live_id, _ = running_run(client)
    answers = {(r.status_code, r.text) for r in (
        _claim(client, queued_id, "wrong"), _claim(client, running_id, "wrong"),
        _claim(client, live_id, "wrong"), _claim(client, 987_654, "wrong"),
        _claim(client, 987_654, ""))}
    assert len(answers) == 1, answers
    assert next(iter(answers))[0] == 401


def _ask(client: TestClient, run_id: int, ticket: str) -> httpx.Response:
    """``GET claim``: would the ticket claim the run now (a worker waiting for a slot asks)."""
    return client.get(f"/api/runs/{run_id}/claim", headers={"Authorization": f"Bearer {ticket}"})


def test_asking_whether_a_ticket_claims_spends_nothing_and_answers_as_the_claim(
        client: TestClient) -> None:
    run_id, ticket = queued_run()
    for _ in range(2):  # asked twice: the run stays queued and the ticket unspent
        assert _ask(client, run_id, ticket).json() == {"claimable": True}
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
    claim(client, run_id, ticket)
    asked, claimed = _ask(client, run_id, ticket), _claim(client, run_id, ticket)
    assert asked.status_code == claimed.status_code == 409  # a redelivered task: claimed
    cancelled_id, cancelled_ticket = queued_run()
    assert client.post(f"/api/runs/{cancelled_id}/cancel").status_code == 200
    assert _ask(client, cancelled_id, cancelled_ticket).status_code == 409
    # a wrong ticket and a missing run: one and the same 401, as the claim answers
    answers = {(r.status_code, r.text) for r in (
        _ask(client, run_id, "wrong"), _ask(client, 987_654, "wrong"), _ask(client, 987_654, ""),
        _claim(client, 987_654, "wrong"))}
    assert len(answers) == 1 and next(iter(answers))[0] == 401, answers


def test_the_worker_asks_the_real_route_and_only_its_no_ends_a_wait(client: TestClient) -> None:
    """``RunClient.claimable`` (a task waiting for a device slot): yes while queued, no once
    cancelled; a server it cannot reach says nothing, so the wait goes on."""
    run_id, ticket = queued_run()
    asking = RunClient("http://127.0.0.1", run_id)
    asking._http = client  # the app in process, over the same httpx API
    assert asking.claimable(ticket) is True
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200
    assert asking.claimable(ticket) is False
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    down = RunClient(f"http://127.0.0.1:{port}", run_id, timeout=2)
    assert down.claimable(ticket) is True
    down.close()
