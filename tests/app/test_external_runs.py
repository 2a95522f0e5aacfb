"""Runs trained elsewhere (``POST /api/runs`` with ``source: external``), in-process on real
SQLite and PostgreSQL: the reply's token drives the same report endpoints a worker uses."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs.models import Run
from tests.app.test_auth import api_key, make_user

BODY = {"source": "external", "name": "my-script",
        "spec": {"model_name": "tiny", "num_generations": 4, "beta": 0.0, "max_steps": 3,
                 "report_to": ["trackio"]}}


def test_an_external_run_is_running_at_once_and_its_token_reports_stops_and_ends(
        client: TestClient) -> None:
    owner = make_user("ada@example.com")
    reply = client.post("/api/runs", json=BODY, headers=api_key("ada@example.com"))
    assert reply.status_code == 201, reply.text
    out = reply.json()
    assert set(out) == {"id", "token", "url"}
    assert out["url"].endswith(f"/runs/{out['id']}") and out["url"].startswith("http")
    headers = {"Authorization": f"Bearer {out['token']}"}
    run = client.get(f"/api/runs/{out['id']}", headers=api_key("ada@example.com")).json()
    assert (run["status"], run["source"], run["max_steps"]) == ("running", "external", 3)
    assert run["spec"]["num_generations"] == 4
    with get_sessionmaker()() as db:
        stored = db.get(Run, out["id"])
        assert stored is not None and stored.task_id is None and stored.created_by_id == owner
    rows = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}
    sent = client.post(f"/api/runs/{out['id']}/metrics", json=rows, headers=headers)
    assert sent.status_code == 200 and sent.json() == {"accepted": 1, "stop": False,
                                                       "reason": None}
    client.post(f"/api/runs/{out['id']}/cancel", headers=api_key("ada@example.com"))
    assert client.get(f"/api/runs/{out['id']}/control", headers=headers).json()["stop"] is True
    done = client.post(f"/api/runs/{out['id']}/finished", json={"returncode": 0}, headers=headers)
    assert done.json()["status"] == "cancelled"
    assert client.post(f"/api/runs/{out['id']}/metrics", json=rows,
                       headers=headers).status_code == 401  # token revoked at the end


def test_registering_needs_an_api_key_once_accounts_exist(client: TestClient) -> None:
    make_user("ada@example.com")
    refused = client.post("/api/runs", json=BODY)
    assert refused.status_code == 401 and "API key" in refused.json()["detail"]
    wrong = client.post("/api/runs", json=BODY, headers={"Authorization": "Bearer gd_nope"})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.json()["detail"]


def _refusal(client: TestClient, body: object) -> str:
    reply = client.post("/api/runs", json=body)
    assert reply.status_code == 422, reply.text
    return str(reply.json())


def test_bad_bodies_are_422s_that_name_the_field(client: TestClient) -> None:
    assert "source" in _refusal(client, {**BODY, "source": "elsewhere"})
    assert "name" in _refusal(client, {"source": "external"})
    assert "name" in _refusal(client, {**BODY, "name": ""})
    assert "spec.num_generations must be int" in _refusal(
        client, {**BODY, "spec": {"num_generations": "4"}})
    assert "spec.beta" in _refusal(client, {**BODY, "spec": {"beta": True}})
    assert "token" in _refusal(client, {**BODY, "token": "mine"})  # extra keys are refused
    assert "spec" in _refusal(client, {**BODY, "spec": {"nested": {"a": 1}}})
    assert "spec" in _refusal(client, {**BODY, "spec": {f"k{i}": i for i in range(1_001)}})
    with get_sessionmaker()() as db:
        assert db.query(Run).count() == 0


def test_a_non_finite_number_in_the_spec_is_refused_not_a_500(client: TestClient) -> None:
    """Found by the API fuzzer: NaN in an outside run's spec reached PostgreSQL's JSON column
    (which has no NaN) as a 500. The client sends non-finite config values as text."""
    for bad in ('{"lr": NaN}', '{"lr": Infinity}', '{"betas": [0.9, -Infinity]}'):
        body = '{"source": "external", "name": "nan-spec", "spec": ' + bad + "}"
        reply = client.post("/api/runs", content=body,
                            headers={"Content-Type": "application/json"})
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["detail"][0]["loc"][:2] == ["body", "spec"], reply.text
    assert [r for r in client.get("/api/runs").json() if r["name"] == "nan-spec"] == []
