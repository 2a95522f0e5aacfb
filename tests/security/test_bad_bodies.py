"""JSON bodies no client sends, refused with a reason, never a 500 (issue 55): a body nested
100,000 levels deep (``[[[[...]]]]``, ``{"a":{"a":...}}``: ``json.loads`` raises
RecursionError) and a 5,000-digit number (Python's int-from-text digit limit raises a plain
ValueError) at the report API's metric batch (fast path and regular route), MLflow's log-batch
(fast path and regular route) and every other MLflow body, and the report routes FastAPI
parses itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import running_run
from tests.app.test_mlflow_api import API, new_run

DEPTH = 100_000
DEEP_BODIES = {
    "deep array": b"[" * DEPTH + b"]" * DEPTH,
    "deep object": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "deep in a row": b'{"rows": [{"step": 1, "metrics": {"a": ' + b"[" * DEPTH + b"]" * DEPTH
                     + b"}}]}",
}
LONG_NUMBER = b'{"rows": [{"step": 1, "metrics": {"a": ' + b"9" * 5_000 + b"}}]}"
LONG_STEP = b'{"rows": [{"step": ' + b"1" * 5_000 + b', "metrics": {"a": 1}}]}'
BODIES = {**DEEP_BODIES, "5,000-digit value": LONG_NUMBER, "5,000-digit step": LONG_STEP}


def chunked(body: bytes) -> Iterator[bytes]:
    """The body without a Content-Length: the fast path leaves it to the regular route."""
    yield body


def _reason(reply_text: str) -> bool:
    return "nested deeper than" in reply_text or "digits" in reply_text \
        or "number out of range" in reply_text


@pytest.mark.parametrize("declared", [True, False], ids=["fast path", "regular route"])
@pytest.mark.parametrize("name", list(BODIES))
def test_a_metric_batch_too_deep_or_too_long_is_a_422_with_a_reason(
        client: TestClient, name: str, declared: bool) -> None:
    run_id, headers = running_run(client)
    body = BODIES[name]
    reply = client.post(f"/api/runs/{run_id}/metrics",
                        content=body if declared else chunked(body),
                        headers={**headers, "Content-Type": "application/json"})
    assert reply.status_code == 422, (reply.status_code, reply.text[:500])
    (error,) = reply.json()["detail"]
    assert error["type"] == "json_invalid" and error["loc"][0] == "body", error
    assert _reason(str(error)), error
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}


# MLflow's routes take 256 KiB at most: the object is 40,000 levels deep, not 100,000
MLFLOW_BODIES = {
    "deep array": DEEP_BODIES["deep array"],
    "deep object": b'{"a":' * 40_000 + b"1" + b"}" * 40_000,
    "deep metric": b'{"run_id": "RUN", "metrics": [{"key": "l", "step": 1, "value": '
                   + b"[" * DEPTH + b"]" * DEPTH + b"}]}",
    "5,000-digit value": b'{"run_id": "RUN", "metrics": [{"key": "l", "step": 1, "value": '
                         + b"9" * 5_000 + b"}]}",
    "5,000-digit step": b'{"run_id": "RUN", "metrics": [{"key": "l", "value": 1, "step": '
                        + b"1" * 5_000 + b"}]}",
}


@pytest.mark.parametrize("declared", [True, False], ids=["fast path", "regular route"])
@pytest.mark.parametrize("name", list(MLFLOW_BODIES))
def test_mlflow_log_batch_too_deep_or_too_long_is_a_400_with_a_reason(
        client: TestClient, name: str, declared: bool) -> None:
    run_id = new_run(client)
    body = MLFLOW_BODIES[name].replace(b"RUN", run_id.encode())
    reply = client.post(f"{API}/runs/log-batch", content=body if declared else chunked(body),
                        headers={"Content-Type": "application/json"})
    assert reply.status_code == 400, (reply.status_code, reply.text[:500])
    answer = reply.json()
    assert answer["error_code"] == "INVALID_PARAMETER_VALUE", answer
    assert _reason(answer["message"]), answer
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}


@pytest.mark.parametrize("route", ["runs/create", "runs/log-metric", "runs/log-parameter",
                                   "runs/set-tag", "runs/update", "experiments/create"])
@pytest.mark.parametrize("name", ["deep array", "deep object", "5,000-digit value"])
def test_every_mlflow_body_too_deep_or_too_long_is_a_400(client: TestClient, route: str,
                                                        name: str) -> None:
    reply = client.post(f"{API}/{route}", content=MLFLOW_BODIES[name].replace(b"RUN", b"1"),
                        headers={"Content-Type": "application/json"})
    assert reply.status_code == 400, (reply.status_code, reply.text[:500])
    assert _reason(reply.json()["message"]), reply.json()


@pytest.mark.parametrize("route", ["logs", "finished", "claim"])
@pytest.mark.parametrize("name", ["deep array", "deep object"])
def test_report_routes_fastapi_parses_refuse_a_deep_body_with_a_4xx(
        client: TestClient, route: str, name: str) -> None:
    run_id, headers = running_run(client)
    reply = client.post(f"/api/runs/{run_id}/{route}", content=MLFLOW_BODIES[name],
                        headers={**headers, "Content-Type": "application/json"})
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.text[:500])
