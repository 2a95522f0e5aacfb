"""The fast path (``app.ingest.fast_path``): a well-formed metric batch (the report API's, or
MLflow's ``runs/log-batch``) is stored around the framework, and every other request reaches
the regular app with its body untouched.

Why: one step per request is bounded by the request's fixed cost, most of which was routing,
dependency solving and eight middlewares a report route does not need (issue 36). The risk
of a second way in is a second truth: so the fast path answers only what the route would answer
the same way (a stored batch, a lock wait), and hands everything else over. The regular app
here is a recorder, so a test can tell which way a request went.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from app.core.config import get_settings
from app.ingest.fast_path import FastPath, FastRoute
from app.ingest.report_api import METRICS_ROUTE
from app.mlflow.api import LOG_BATCH_ROUTE
from app.security.headers import HEADERS
from tests.app.conftest import running_run
from tests.app.test_auth import api_key, make_user
from tests.app.test_mlflow_api import API, new_run
from tests.security.test_lock_waits import held_lock, short_lock_wait  # noqa: F401 (fixture)

ROW = {"rows": [{"step": 1, "metrics": {"reward": 0.5, "loss": 1.5}}]}
LOG_BATCH = f"{API}/runs/log-batch"


def mlflow_step(run_id: str, step: int = 1) -> dict[str, Any]:
    """One logged step as MLflow's REST client sends ``log_metrics(..., step=)``."""
    return {"run_id": run_id, "metrics": [
        {"key": "reward", "value": 0.5, "timestamp": 1, "step": step},
        {"key": "loss", "value": 1.5, "timestamp": 1, "step": step}]}


def fast_path(regular: Any) -> FastPath:
    """The middleware as ``create_app`` installs it, over ``regular``."""
    return FastPath(regular, routes=[METRICS_ROUTE, LOG_BATCH_ROUTE])


class Recorder:
    """The regular app: records each request it gets, with the body it could read."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        with anyio.fail_after(10):  # a body never handed over fails the test, not hangs it
            while True:
                message: Message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
        self.seen.append((scope["path"], body))
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b"regular"})


@pytest.fixture
def fast(app_db: str) -> tuple[TestClient, Recorder]:
    recorder = Recorder()
    return TestClient(fast_path(recorder), base_url="http://127.0.0.1"), recorder


def test_a_well_formed_batch_is_stored_without_the_regular_app(
        client: TestClient, fast: tuple[TestClient, Recorder]) -> None:
    run_id, headers = running_run(client)
    fast_client, recorder = fast
    reply = fast_client.post(f"/api/runs/{run_id}/metrics", json=ROW, headers=headers)
    assert (reply.status_code, recorder.seen) == (200, []), reply.text
    assert reply.json() == {"accepted": 2, "stop": False, "reason": None}
    for name, value in HEADERS.items():  # what SecurityHeaders gives every other response
        assert reply.headers[name] == value
    stored = client.get(f"/api/runs/{run_id}/metrics").json()
    assert stored["reward"]["steps"] == [1] and stored["loss"]["values"] == [1.5]


def test_the_full_app_answers_a_batch_as_the_route_does(client: TestClient) -> None:
    """Through create_app(): the reply the worker and the Sender read, and the stop flag."""
    run_id, headers = running_run(client)
    reply = client.post(f"/api/runs/{run_id}/metrics", json=ROW, headers=headers)
    assert reply.json() == {"accepted": 2, "stop": False, "reason": None}
    assert client.post(f"/api/runs/{run_id}/cancel").status_code in (200, 202, 303)
    again = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                        json={"rows": [{"step": 2, "metrics": {"reward": 0.6}}]})
    assert again.status_code == 200 and again.json()["stop"] is True, again.text


@pytest.mark.parametrize(("why", "body", "wrong_token"), [
    ("wrong token", ROW, True),
    ("not JSON", b"{rows: [", False),
    ("not a batch", {"rows": [{"metrics": {"reward": 1}}]}, False),
    ("a lone surrogate only json.loads reads", b'{"rows": [], "x": "\\ud800"}', False),
])
def test_what_the_route_refuses_or_reads_its_own_way_reaches_the_regular_app_whole(
        client: TestClient, fast: tuple[TestClient, Recorder], why: str, body: Any,
        wrong_token: bool) -> None:
    run_id, headers = running_run(client)
    if wrong_token:
        headers = {"Authorization": "Bearer " + "x" * 43}
    fast_client, recorder = fast
    raw = body if isinstance(body, bytes) else None
    reply = (fast_client.post(f"/api/runs/{run_id}/metrics", content=raw, headers=headers)
             if raw is not None else
             fast_client.post(f"/api/runs/{run_id}/metrics", json=body, headers=headers))
    assert reply.status_code == 418, why
    assert len(recorder.seen) == 1 and recorder.seen[0][0] == f"/api/runs/{run_id}/metrics"
    assert recorder.seen[0][1] == reply.request.content, why  # the body, replayed whole
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}, why  # nothing stored


def test_a_missing_run_and_an_ended_one_reach_the_regular_app(
        client: TestClient, fast: tuple[TestClient, Recorder]) -> None:
    run_id, headers = running_run(client)
    fast_client, recorder = fast
    assert client.post(f"/api/runs/{run_id}/finished", headers=headers,
                       json={"returncode": 0}).status_code == 200
    for target in (run_id, run_id + 999):
        reply = fast_client.post(f"/api/runs/{target}/metrics", json=ROW, headers=headers)
        assert reply.status_code == 418, target
    assert [path for path, _ in recorder.seen] == [f"/api/runs/{run_id}/metrics",
                                                   f"/api/runs/{run_id + 999}/metrics"]


def test_a_body_over_the_ingest_limit_or_of_no_declared_length_is_not_read_here(
        client: TestClient, fast: tuple[TestClient, Recorder]) -> None:
    """The regular app's body limit answers those (a 413 naming the limit; chunked bodies
    counted as they stream): the fast path reads only a body it knows the size of."""
    run_id, headers = running_run(client)
    fast_client, recorder = fast
    limit = get_settings().ingest_max_body_bytes
    big = b'{"rows": []' + b" " * limit + b"}"
    assert fast_client.post(f"/api/runs/{run_id}/metrics", content=big,
                            headers=headers).status_code == 418
    chunked = fast_client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                               content=iter([b'{"rows": ', b"[]}"]))
    assert chunked.status_code == 418
    assert [len(body) for _, body in recorder.seen] == [len(big), len(b'{"rows": []}')]
    over = client.post(f"/api/runs/{run_id}/metrics", content=big, headers=headers)
    assert over.status_code == 413 and "limit" in over.json()["detail"]


def test_other_routes_and_methods_go_the_regular_way(
        client: TestClient, fast: tuple[TestClient, Recorder]) -> None:
    run_id, headers = running_run(client)
    fast_client, recorder = fast
    fast_client.get(f"/api/runs/{run_id}/metrics", headers=headers)
    fast_client.post(f"/api/runs/{run_id}/logs", json={"lines": []}, headers=headers)
    fast_client.post(f"/api/runs/{run_id}/metrics/extra", json=ROW, headers=headers)
    assert len(recorder.seen) == 3


@pytest.mark.usefixtures("short_lock_wait")  # a request waits 1 s for the lock
def test_a_lock_wait_is_answered_busy_here_and_nothing_is_stored(
        client: TestClient, app_db: str) -> None:
    """Handing a lock wait over would make the reporter wait twice for the same lock."""
    run_id, headers = running_run(client)
    mlflow_run = new_run(client)
    recorder = Recorder()
    fast_client = TestClient(fast_path(recorder), base_url="http://127.0.0.1")
    with held_lock(app_db):
        replies = [fast_client.post(f"/api/runs/{run_id}/metrics", json=ROW, headers=headers),
                   fast_client.post(LOG_BATCH, json=mlflow_step(mlflow_run))]
    for reply in replies:
        assert reply.status_code == 503, reply.text
        assert reply.headers["Retry-After"] == "5" and "busy" in reply.json()["detail"]
    assert recorder.seen == []
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}
    assert client.get(f"/api/runs/{mlflow_run}/metrics").json() == {}


def test_a_well_formed_mlflow_log_batch_is_stored_without_the_regular_app(
        client: TestClient, fast: tuple[TestClient, Recorder]) -> None:
    """Development mode (loopback, no account) and an API key: both are callers here."""
    fast_client, recorder = fast
    dev_run = new_run(client)
    reply = fast_client.post(LOG_BATCH, json=mlflow_step(dev_run))
    assert (reply.status_code, recorder.seen) == (200, []), reply.text
    assert reply.json() == {} and reply.headers["content-type"] == "application/json"
    for name, value in HEADERS.items():
        assert reply.headers[name] == value
    stored = client.get(f"/api/runs/{dev_run}/metrics").json()
    assert stored["reward"]["steps"] == [1] and stored["loss"]["values"] == [1.5]
    make_user("owner@example.com")
    key = api_key("owner@example.com")
    owned = new_run(client, **key)
    assert fast_client.post(LOG_BATCH, json=mlflow_step(owned), headers=key).status_code == 200
    assert recorder.seen == []
    assert client.get(f"/api/runs/{owned}/metrics", headers=key).json()["reward"]["steps"] == [1]


@pytest.mark.parametrize(("why", "headers", "body"), [
    ("cross-site, in development mode", {"Sec-Fetch-Site": "cross-site"}, None),
    ("another origin, in development mode", {"Origin": "http://evil.example"}, None),
    ("not JSON", {}, b"{not json"),
    ("a bad metric", {}, {"metrics": [{"key": "loss", "value": "lots", "step": 1}]}),
    ("a run the Deck launched", {}, "launched"),
    ("a run that is not there", {}, {"run_id": "99999"}),
])
def test_what_mlflow_refuses_reaches_the_regular_app_whole(
        client: TestClient, fast: tuple[TestClient, Recorder], why: str,
        headers: dict[str, str], body: Any) -> None:
    fast_client, recorder = fast
    run_id = new_run(client)
    if body == "launched":
        body = mlflow_step(str(running_run(client)[0]))
    elif isinstance(body, dict):
        body = {**mlflow_step(run_id), **body}
    raw = body if isinstance(body, bytes) else None
    reply = (fast_client.post(LOG_BATCH, content=raw, headers=headers) if raw is not None else
             fast_client.post(LOG_BATCH, json=body or mlflow_step(run_id), headers=headers))
    assert reply.status_code == 418, why
    assert recorder.seen == [(LOG_BATCH, reply.request.content)], why
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}, why


def test_mlflow_callers_the_app_refuses_reach_the_regular_app(
        client: TestClient, fast: tuple[TestClient, Recorder]) -> None:
    """Once an account exists: no credentials, a wrong key, another user's run."""
    fast_client, recorder = fast
    make_user("owner@example.com")
    make_user("other@example.com")
    owned = new_run(client, **api_key("owner@example.com"))
    for headers in ({}, {"Authorization": "Bearer gd_" + "x" * 40},
                    api_key("other@example.com")):
        reply = fast_client.post(LOG_BATCH, json=mlflow_step(owned), headers=headers)
        assert reply.status_code == 418, headers
    assert len(recorder.seen) == 3
    owner = api_key("owner@example.com")
    assert client.get(f"/api/runs/{owned}/metrics", headers=owner).json() == {}


@pytest.mark.parametrize("headers", [{"Sec-Fetch-Site": "cross-site"},
                                     {"Origin": "http://evil.example"}])
def test_the_full_app_refuses_a_cross_origin_log_batch_in_development_mode(
        client: TestClient, headers: dict[str, str]) -> None:
    """Development mode asks MLflow callers for no credentials: a page in the user's browser
    must not be able to log into their runs (the regular app's CrossOriginProtection)."""
    run_id = new_run(client)
    refused = client.post(LOG_BATCH, json=mlflow_step(run_id), headers=headers)
    assert refused.status_code == 403 and "cross-origin" in refused.text
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}
    assert client.post(LOG_BATCH, json=mlflow_step(run_id)).status_code == 200


def test_an_unexpected_error_in_the_work_reaches_the_regular_app_whole(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    """The fast path stands in front of FastAPI's error middleware (``app.main.DeckApp``): an
    error its work did not expect must still get the regular app's answer, not escape to the
    server, and nothing half-stored stays."""
    run_id, headers = running_run(client)

    def broken(*_: Any) -> bytes:
        raise RuntimeError("a bug in the work")

    recorder = Recorder()
    route = FastRoute(METRICS_ROUTE.path, broken, refused=METRICS_ROUTE.refused)
    fast_client = TestClient(FastPath(recorder, routes=[route]), base_url="http://127.0.0.1")
    reply = fast_client.post(f"/api/runs/{run_id}/metrics", json=ROW, headers=headers)
    assert reply.status_code == 418
    assert recorder.seen == [(f"/api/runs/{run_id}/metrics", reply.request.content)]
    assert "a bug in the work" in caplog.text  # logged where it happened
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}


def test_the_app_stores_a_batch_in_front_of_fastapis_own_entrance(client: TestClient) -> None:
    """``create_app()``'s front door: a well-formed batch never enters FastAPI's middleware
    stack (its error, telemetry and body-limit layers, our middlewares, the routing), where a
    one-step report cost ~12 % more; everything else still does."""
    from app.main import create_app

    run_id, headers = running_run(client)
    app = create_app()
    recorder = Recorder()
    app.middleware_stack = recorder  # type: ignore[assignment]  # FastAPI's entrance, recorded
    front_client = TestClient(app, base_url="http://127.0.0.1")
    reply = front_client.post(f"/api/runs/{run_id}/metrics", json=ROW, headers=headers)
    assert (reply.status_code, recorder.seen) == (200, []), reply.text
    assert client.get(f"/api/runs/{run_id}/metrics").json()["reward"]["steps"] == [1]
    assert front_client.get("/healthz").status_code == 418
    refused = front_client.post(f"/api/runs/{run_id}/metrics", json=ROW,
                                headers={"Authorization": "Bearer " + "x" * 43})
    assert refused.status_code == 418
    assert [path for path, _ in recorder.seen] == ["/healthz", f"/api/runs/{run_id}/metrics"]
