"""Fuzzing the JSON API in-process from its OpenAPI schema (schemathesis): no request, valid or
not, gets a 5xx. Schemathesis generates JSON-compatible data only, so NaN/Infinity, 1e400,
huge numbers and strings, NUL and lone surrogates are planted into its bodies here; the report
endpoints are fuzzed with a valid per-run token too.

Bounded in time: ``max_examples`` per test keeps this module well under a minute.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.app.conftest import running_run

# GRPODECK_FUZZ_EXAMPLES=3000 for a long hunt (~3 min); CI's 80 keep the module under a minute.
FUZZ = settings(max_examples=int(os.environ.get("GRPODECK_FUZZ_EXAMPLES", "80")), deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

# Values JSON parsers accept (Python's json.loads reads NaN, Infinity and 1e400 -> inf) that
# used to give a 500 somewhere.
POISON = [math.nan, math.inf, -math.inf, 2**70, -(2**63), 2**31, 10**400, 1e300, "\ud800",
          "a\x00b", "x" * 5_000, "y" * 100_000, "", [], {}, {"k" * 300: "v"}, None, True]


pytestmark = pytest.mark.postgres_only  # it refuses more (NUL, integer ranges, NaN in json)


@pytest.fixture
def app(app_db: str):  # type: ignore[no-untyped-def]
    from app.main import create_app

    return create_app()


LOCAL = "http://127.0.0.1"  # development mode: a loopback socket and Host, no login needed


def schema_of(app) -> Any:  # type: ignore[no-untyped-def]
    """The app's own schema; calls go in-process to the ASGI app as a loopback client."""
    schema = schemathesis.openapi.from_dict(app.openapi())
    schema.app = app
    return schema


def no_5xx(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what} -> {response.status_code}: {response.text[:500]}"


def test_every_operation_answers_without_5xx(app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(app, base_url=LOCAL)
    run_id, headers = running_run(client)
    schema = schema_of(app)
    with_token = [schema[path][method].as_strategy(
        GenerationMode.POSITIVE, path_parameters={"run_id": run_id}, headers=headers)
        for path, method in (("/api/runs/{run_id}/metrics", "POST"),
                             ("/api/runs/{run_id}/control", "GET"),
                             ("/api/runs/{run_id}/claim", "POST"),
                             ("/api/runs/{run_id}/claim", "GET"))]
    cases = st.one_of(schema.as_strategy(GenerationMode.POSITIVE),
                      schema.as_strategy(GenerationMode.NEGATIVE), *with_token)

    @FUZZ
    @given(case=cases)
    def fuzz(case: Any) -> None:
        no_5xx(case.call(base_url=LOCAL), f"{case.method} {case.formatted_path} {case.body!r:.300}")

    fuzz()


def leaf_paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON document a value can be put (each key, item, and a new key)."""
    paths = [prefix]
    if isinstance(value, dict):
        paths.append((*prefix, "fuzz-extra"))
        for key, item in value.items():
            paths += leaf_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            paths += leaf_paths(item, (*prefix, i))
    return paths


def planted(body: Any, path: tuple, poison: Any) -> Any:
    if not path:
        return poison
    head, rest = path[0], path[1:]
    if isinstance(body, dict):
        return {**body, head: planted(body.get(head), rest, poison)}
    copy = list(body)
    copy[head] = planted(copy[head], rest, poison)
    return copy


def test_non_finite_and_huge_values_in_json_bodies_never_answer_5xx(app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(app, base_url=LOCAL)
    run_id, headers = running_run(client)
    schema = schema_of(app)
    targets = [(schema["/api/runs"]["POST"], {}, {}),
               (schema["/api/runs/{run_id}/metrics"]["POST"], {"run_id": run_id}, headers),
               (schema["/api/runs/{run_id}/finished"]["POST"], {"run_id": run_id}, headers)]

    @FUZZ
    @given(data=st.data())
    def fuzz(data: Any) -> None:
        operation, path_parameters, auth = data.draw(st.sampled_from(targets))
        case = data.draw(operation.as_strategy(GenerationMode.POSITIVE,
                                               path_parameters=path_parameters))
        where = data.draw(st.sampled_from(leaf_paths(case.body)))
        body = planted(case.body, where, data.draw(st.sampled_from(POISON)))
        raw = json.dumps(body).encode("utf-8", "surrogatepass")  # NaN, Infinity as JS spells them
        url = case.formatted_path
        response = client.post(url, content=raw,
                               headers={"content-type": "application/json", **auth})
        no_5xx(response, f"POST {url} {raw[:300]!r}")

    fuzz()


# Integer edges of the columns behind the API: every run plants each into every integer a
# generated request carries (issue 33: ``pid`` 2**31 was a PostgreSQL 500, found only by chance).
INT_EDGES = [2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1]
# Free-form JSON (a spec's params, a metric's value) is stored as JSON or a float, and path ids
# are looked up only when a column holds them (``storable_id``): a 404, never a database error.
UNBOUNDED_BY_DESIGN = ("body.spec{}", "body.spec{}[]", "body.rows[].metrics{}")


def integer_fields(openapi: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    """(operation, where, minimum, maximum) of every integer a request body or query takes."""
    components = openapi.get("components", {}).get("schemas", {})
    found: list[tuple[str, str, Any, Any]] = []

    def walk(schema: Any, op: str, where: str, seen: tuple[str, ...] = ()) -> None:
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            name = schema["$ref"].split("/")[-1]
            if name not in seen:
                walk(components[name], op, where, (*seen, name))
            return
        if schema.get("type") == "integer":
            found.append((op, where, schema.get("minimum", schema.get("exclusiveMinimum")),
                          schema.get("maximum", schema.get("exclusiveMaximum"))))
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key, []):
                walk(sub, op, where, seen)
        for key, sub in schema.get("properties", {}).items():
            walk(sub, op, f"{where}.{key}", seen)
        walk(schema.get("items"), op, f"{where}[]", seen)
        walk(schema.get("additionalProperties"), op, f"{where}{{}}", seen)

    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            op = f"{method.upper()} {path}"
            for param in operation.get("parameters", []):
                if param.get("in") != "path":
                    walk(param.get("schema"), op, f"{param['in']}.{param['name']}")
            for content in operation.get("requestBody", {}).get("content", {}).values():
                walk(content.get("schema"), op, "body")
    return found


def test_every_integer_the_api_takes_is_bounded(app) -> None:  # type: ignore[no-untyped-def]
    fields = integer_fields(app.openapi())
    assert any(where == "body.pid" for _, where, _, _ in fields)
    unbounded = [(op, where) for op, where, low, high in fields
                 if where not in UNBOUNDED_BY_DESIGN and (low is None or high is None
                                                          or high > 2**63 - 1 or low < -(2**63))]
    assert unbounded == []


def int_leaves(value: Any, prefix: tuple = ()) -> list[tuple]:
    """The places in a JSON document that hold an integer."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [prefix]
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else [])
    return [leaf for key, item in items for leaf in int_leaves(item, (*prefix, key))]


def test_integer_edges_in_every_body_and_query_never_answer_5xx(app) -> None:  # type: ignore[no-untyped-def]
    """Each generated request gets every edge in every integer it carries, body and query."""
    client = TestClient(app, base_url=LOCAL)
    run_id, headers = running_run(client)
    schema = schema_of(app)
    openapi = app.openapi()
    operations = [schema[path][method.upper()] for path, ops in openapi["paths"].items()
                  for method, op in ops.items()
                  if method in ("get", "post", "put", "patch", "delete")
                  and ("requestBody" in op or any(p.get("in") == "query"
                                                  for p in op.get("parameters", [])))]
    params = {"run_id": run_id}

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def fuzz(data: Any) -> None:
        operation = data.draw(st.sampled_from(operations))
        names = {p["name"] for p in operation.definition.raw.get("parameters", [])
                 if p.get("in") == "path"}
        case = data.draw(operation.as_strategy(
            GenerationMode.POSITIVE, path_parameters={k: v for k, v in params.items()
                                                      if k in names}))
        for edge in INT_EDGES:
            body = case.body if isinstance(case.body, dict | list) else None
            for leaf in int_leaves(body) if body is not None else []:
                raw = json.dumps(planted(body, leaf, edge))
                response = client.request(case.method, case.formatted_path, content=raw,
                                          params=case.query,
                                          headers={"content-type": "application/json", **headers})
                no_5xx(response, f"{case.method} {case.formatted_path} {raw[:300]}")
            for key, value in (case.query or {}).items():
                if isinstance(value, int) and not isinstance(value, bool):
                    response = client.request(case.method, case.formatted_path,
                                              params={**case.query, key: edge}, headers=headers)
                    no_5xx(response, f"{case.method} {case.formatted_path} ?{key}={edge}")

    fuzz()


def test_a_heartbeat_pid_past_its_column_is_a_422(app) -> None:  # type: ignore[no-untyped-def]
    client = TestClient(app, base_url=LOCAL)
    for pid, code in ((2**31, 422), (2**63, 422), (2**31 - 1, 204)):
        reply = client.post("/api/workers/heartbeat", json={"name": "w", "pid": pid})
        assert reply.status_code == code, reply.text
