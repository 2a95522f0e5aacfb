"""The report API's metric batches are parsed by pydantic's own JSON parser
(``app/core/json_body.py``): the same answers as FastAPI's path, in its 422 shape, and the
body still documented in the OpenAPI schema (which the fuzz tests generate bodies from)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import running_run


def _raw(client: TestClient, run_id: int, headers: dict[str, str], body: str):  # type: ignore[no-untyped-def]
    return client.post(f"/api/runs/{run_id}/metrics", content=body,
                       headers={**headers, "Content-Type": "application/json"})


def test_a_bad_row_is_a_422_at_its_place_in_the_body(client: TestClient) -> None:
    run_id, headers = running_run(client)
    reply = _raw(client, run_id, headers, '{"rows": [{"step": 1, "metrics": {}}, '
                                          '{"step": -3, "metrics": {"a": 1}}]}')
    assert reply.status_code == 422
    (error,) = reply.json()["detail"]
    assert error["loc"] == ["body", "rows", 1, "step"] and error["type"] == "greater_than_equal"


def test_malformed_json_is_a_422_that_says_where(client: TestClient) -> None:
    run_id, headers = running_run(client)
    reply = _raw(client, run_id, headers, '{"rows": [{"step": 1,')
    assert reply.status_code == 422
    (error,) = reply.json()["detail"]
    assert error["type"] == "json_invalid" and error["loc"][0] == "body"


def test_bytes_that_are_not_utf8_are_a_422_not_a_500(client: TestClient) -> None:
    """json.loads guesses UTF-16/32 from NUL bytes and raises UnicodeDecodeError, not a
    JSONDecodeError (found by the schema fuzzer, issue 33's CI run)."""
    run_id, headers = running_run(client)
    for body in (b"\x00\x00\x00{\x00", b"\xb0", b"{\"rows\": [\x88]}"):
        reply = client.post(f"/api/runs/{run_id}/metrics", content=body,
                            headers={**headers, "Content-Type": "application/json"})
        assert reply.status_code == 422, (body, reply.status_code)
        (error,) = reply.json()["detail"]
        assert error["type"] == "json_invalid" and error["loc"][0] == "body"


def test_non_finite_and_overflowing_numbers_are_taken_as_before(client: TestClient) -> None:
    run_id, headers = running_run(client)
    reply = _raw(client, run_id, headers, '{"rows": [{"step": 1, "metrics": {"a": NaN, '
                                          '"b": Infinity, "c": 1e400, "d": "0.5", "e": 7}}]}')
    assert reply.status_code == 200 and reply.json()["accepted"] == 5
    body = client.get(f"/api/runs/{run_id}/metrics").json()
    assert {k: v["values"] for k, v in body.items()} == {
        "a": ["nan"], "b": ["inf"], "c": ["inf"], "d": [0.5], "e": [7.0]}


def test_the_batch_is_documented_in_the_openapi_schema(client: TestClient) -> None:
    schema = client.app.openapi()  # type: ignore[attr-defined]
    body = schema["paths"]["/api/runs/{run_id}/metrics"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/MetricBatch"}
    components = schema["components"]["schemas"]
    assert components["MetricBatch"]["properties"]["rows"]["items"] == {
        "$ref": "#/components/schemas/MetricRow"}
    assert "RolloutStep" in components and "Completion" in components
