"""The MLflow-compatible API in-process (real SQLite/PostgreSQL): bad input is MLflow's 400/404
with the reason and stores nothing, browsers' cross-origin posts stay refused, a session cookie
is no credential here, and runs launched by the Deck are not MLflow's to write. The real
``mlflow`` client against a live server is tests/client/test_mlflow_live.py."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.mlflow import mapping
from tests.app.conftest import running_run
from tests.app.test_auth import api_key, login, make_user

API = "/mlflow/api/2.0/mlflow"


def new_run(client: TestClient, **headers: str) -> str:
    made = client.post(f"{API}/runs/create", json={"experiment_id": "0", "run_name": "m"},
                       headers=headers)
    assert made.status_code == 200, made.text
    return str(made.json()["run"]["info"]["run_id"])


def refusal(answer, status: int, code: str, says: str) -> None:  # type: ignore[no-untyped-def]
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["error_code"] == code and says in body["message"], body


def stored(client: TestClient, run_id: str) -> dict:  # type: ignore[type-arg]
    return client.get(f"/api/runs/{run_id}/metrics").json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(("metric", "says"), [
    ({"key": "loss", "value": 1.0, "step": -1}, "step -1 is outside"),
    ({"key": "loss", "value": 1.0, "step": "4294967296"}, "is outside"),
    ({"key": "loss", "value": "lots", "step": 1}, "'lots' is not a number"),
    ({"key": "loss", "value": [1], "step": 1}, "metrics.1.value"),
    ({"value": 1.0, "step": 1}, "metrics.1.key"),
])
def test_a_bad_metric_refuses_the_whole_batch(client: TestClient, metric: dict,  # type: ignore[type-arg]
                                              says: str) -> None:
    run_id = new_run(client)
    batch = {"run_id": run_id, "metrics": [{"key": "reward", "value": 0.5, "step": 1}, metric]}
    refusal(client.post(f"{API}/runs/log-batch", json=batch), 400, "INVALID_PARAMETER_VALUE",
            says)
    assert stored(client, run_id) == {}


def test_bodies_and_ids_that_are_not_mlflows_are_400_and_404(client: TestClient) -> None:
    refusal(client.post(f"{API}/runs/log-batch", content=b"{not json"), 400,
            "INVALID_PARAMETER_VALUE", "not JSON")
    refusal(client.post(f"{API}/runs/log-batch", json=[1, 2]), 400, "INVALID_PARAMETER_VALUE",
            "body")
    for run_id in ("12345", "99999999999999999999", "abc", ""):
        refusal(client.post(f"{API}/runs/log-metric",
                            json={"run_id": run_id, "key": "l", "value": 1, "step": 1}),
                404, "RESOURCE_DOES_NOT_EXIST", "no run with id")
    refusal(client.post(f"{API}/runs/create", json={"experiment_id": "a.b"}), 404,
            "RESOURCE_DOES_NOT_EXIST", "no experiment")
    refusal(client.get(f"{API}/experiments/get-by-name"), 400, "INVALID_PARAMETER_VALUE",
            "experiment_name")


def test_reserved_and_oversized_params(client: TestClient) -> None:
    run_id = new_run(client)
    refusal(client.post(f"{API}/runs/log-parameter",
                        json={"run_id": run_id, "key": "group", "value": "x"}),
            400, "INVALID_PARAMETER_VALUE", "reserved")
    long = "x" * 5_000
    ok = client.post(f"{API}/runs/log-batch", json={"run_id": run_id, "params": [
        {"key": "chat_template", "value": long}, {"key": "beta", "value": "0.04"},
        {"key": "lr", "value": "nan"}]})
    assert ok.status_code == 200, ok.text
    spec = client.get(f"/api/runs/{run_id}").json()["spec"]
    assert len(spec["chat_template"]) == mapping.MAX_PARAM_CHARS
    assert spec["beta"] == 0.04 and spec["lr"] == "nan"  # JSON has no NaN: kept as text


@pytest.mark.parametrize("headers", [{"Sec-Fetch-Site": "cross-site"},
                                     {"Origin": "http://evil.example"}])
def test_cross_origin_posts_are_refused_and_create_nothing(client: TestClient,
                                                           headers: dict[str, str]) -> None:
    refused = client.post(f"{API}/runs/create", json={"experiment_id": "0"}, headers=headers)
    assert refused.status_code == 403 and "cross-origin" in refused.text
    assert client.get("/api/runs").json() == []


def test_a_browser_session_is_no_credential_but_an_api_key_is(client: TestClient) -> None:
    make_user("owner@example.com")
    assert login(client, "owner@example.com").status_code == 303  # the cookie is set now
    refusal(client.post(f"{API}/runs/create", json={"experiment_id": "0"}), 401,
            "UNAUTHENTICATED", "MLFLOW_TRACKING_TOKEN")
    assert new_run(client, **api_key("owner@example.com"))


def test_a_run_the_deck_launched_is_not_the_mlflow_clients(client: TestClient) -> None:
    run_id, _ = running_run(client)
    refusal(client.post(f"{API}/runs/log-metric",
                        json={"run_id": str(run_id), "key": "loss", "value": 1, "step": 1}),
            400, "INVALID_STATE", "launched by the Deck")
    refusal(client.post(f"{API}/runs/update", json={"run_id": str(run_id), "status": "FAILED"}),
            400, "INVALID_STATE", "launched by the Deck")
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"


def test_param_strings_come_back_as_the_values_they_were() -> None:
    assert [mapping.param_value(v) for v in ("4", "0.5", "1e-4", "True", "false", "None",
                                             "inf", "Qwen/Qwen2", "[1, 2]")] == \
        [4, 0.5, 1e-4, True, False, None, "inf", "Qwen/Qwen2", "[1, 2]"]
