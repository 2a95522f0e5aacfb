"""Fuzzing the JSON API in-process from its OpenAPI schema (schemathesis): no request, valid or
not, gets a 5xx. Schemathesis generates JSON-compatible data only, so NaN/Infinity, 1e400,
huge numbers and strings, NUL and lone surrogates are planted into its bodies here; the report
endpoints are fuzzed with a valid per-run token too.

Bounded in time: ``max_examples`` per test keeps this module well under a minute.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.app.conftest import running_run

FUZZ = settings(max_examples=80, deadline=None, database=None,
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
                             ("/api/runs/{run_id}/claim", "POST"))]
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
