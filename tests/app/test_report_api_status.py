"""The report API answers the worker by the run's status: a finished run stays finished, a
run that is not running takes no metrics, and every reply says whether to stop."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import claim, queued_run, running_run

ONE_ROW = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}


def status_of(client: TestClient, run_id: int) -> str:
    return client.get(f"/api/runs/{run_id}").json()["status"]


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.mark.parametrize("ending,final", [
    ({"returncode": 0}, "succeeded"),
    ({"returncode": 3, "error": "boom"}, "failed"),
    (None, "cancelled"),
])
def test_a_claim_on_a_finished_run_is_refused(client: TestClient, ending, final) -> None:
    run_id, ticket = queued_run()
    headers = claim(client, run_id, ticket)
    client.post(f"/api/runs/{run_id}/metrics", json=ONE_ROW, headers=headers)
    if ending is None:
        client.post(f"/api/runs/{run_id}/cancel")
        ending = {"returncode": 0}
    client.post(f"/api/runs/{run_id}/finished", json=ending, headers=headers)
    assert status_of(client, run_id) == final
    again = client.post(f"/api/runs/{run_id}/claim", json={"pid": 2}, headers=bearer(ticket))
    assert again.status_code == 409
    assert f"is {final} and already claimed or ended" in again.json()["detail"]
    assert status_of(client, run_id) == final


def test_a_second_claim_is_refused(client: TestClient) -> None:
    run_id, ticket = queued_run()
    claim(client, run_id, ticket)
    again = client.post(f"/api/runs/{run_id}/claim", json={"pid": 2}, headers=bearer(ticket))
    assert again.status_code == 409 and status_of(client, run_id) == "running"


def test_claim_reply_and_worker_fields(client: TestClient) -> None:
    run_id, ticket = queued_run()
    reply = client.post(f"/api/runs/{run_id}/claim", json={"pid": 41, "host": "gpu-1"},
                        headers=bearer(ticket))
    assert reply.status_code == 200
    body = reply.json()
    assert body.pop("token") != ticket
    assert len(body.pop("marker_key")) >= 32  # signs the rank lines the Devices panel believes
    assert body == {"stop": False, "reason": None, "status": "running"}


def test_metrics_need_a_claimed_running_run(client: TestClient) -> None:
    run_id, ticket = queued_run()
    refused = client.post(f"/api/runs/{run_id}/metrics", json=ONE_ROW, headers=bearer(ticket))
    assert refused.status_code == 401  # a ticket is no token: only a claim makes one
    headers = claim(client, run_id, ticket)
    client.post(f"/api/runs/{run_id}/finished", json={"returncode": 1}, headers=headers)
    late = client.post(f"/api/runs/{run_id}/metrics", json=ONE_ROW, headers=headers)
    assert late.status_code == 401  # the token expired with the run
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}


def test_a_queued_run_cannot_succeed_without_a_claim(client: TestClient) -> None:
    run_id, ticket = queued_run()
    done = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0},
                       headers=bearer(ticket))
    assert done.status_code == 401 and status_of(client, run_id) == "queued"


def test_control_says_whether_to_stop(client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert client.get(f"/api/runs/{run_id}/control", headers=headers).json() == {
        "stop": False, "reason": None, "status": "running"}
    client.post(f"/api/runs/{run_id}/cancel")
    assert client.get(f"/api/runs/{run_id}/control", headers=headers).json() == {
        "stop": True, "reason": "cancelled by user", "status": "running"}
    ended = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert ended.json()["stop"] is True
    assert client.get(f"/api/runs/{run_id}/control", headers=headers).status_code == 401


def test_a_finished_run_tells_the_worker_to_stop_without_a_cancel(client: TestClient) -> None:
    run_id, headers = running_run(client)
    reply = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 1}, headers=headers)
    assert reply.json() == {"stop": True, "reason": None, "status": "failed"}


def test_the_token_is_read_from_the_bearer_header(client: TestClient) -> None:
    run_id, headers = running_run(client)
    token = headers["Authorization"].removeprefix("Bearer ")
    ok = client.get(f"/api/runs/{run_id}/control",
                    headers={"Authorization": f"Bearer {token}  "})
    assert ok.status_code == 200
    for bad in ("Bearer ", "Bearer", "", f"Bearer {token}x"):
        reply = client.get(f"/api/runs/{run_id}/control", headers={"Authorization": bad})
        assert reply.status_code == 401, bad
        assert reply.json()["detail"] == "missing or wrong run token"
    missing = client.get("/api/runs/999/control", headers=headers)
    assert missing.status_code == 404 and missing.json()["detail"] == "run 999 not found"
