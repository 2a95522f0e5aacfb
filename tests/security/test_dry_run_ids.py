"""Issue 55: an anonymous caller could tell which dry-run ids exist (404 for a missing id, 401
for an existing one). Now every dry-run route answers an anonymous caller the same whether or
not the id exists: the pages and the API ask them to sign in, and the worker's ticket routes
(exempt from login) refuse a wrong ticket and a missing dry run with one and the same 401."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.test_auth import make_user
from tests.app.test_smoke_and_dry_run_api import stored_dry_run

MISSING = 987_654
ROUTES = [("GET", "/dry-runs/{id}"), ("GET", "/dry-runs/{id}/_result"),
          ("POST", "/dry-runs/{id}/launch"), ("GET", "/api/dry-runs/{id}"),
          ("POST", "/api/dry-runs/{id}/result"), ("POST", "/api/dry-runs/{id}/alive")]
BODIES = {"result": {"groups": []}, "alive": {"worker": "w"}}


def _answer(client: TestClient, method: str, path: str, headers: dict[str, str]
            ) -> tuple[int, str, str]:
    """(status, redirect target, detail with the id taken out): what the caller learns."""
    body = BODIES.get(path.rsplit("/", 1)[-1])
    reply = client.request(method, path, json=body, headers=headers, follow_redirects=False)
    detail = reply.json().get("detail") if "json" in reply.headers.get("content-type", "") else ""
    where = reply.headers.get("location", "").split("?")[0]
    return reply.status_code, where, str(detail).split(":")[-1]


@pytest.mark.parametrize(("method", "template"), ROUTES)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-the-ticket"}],
                         ids=["no-credentials", "wrong-ticket"])
def test_an_anonymous_caller_gets_one_answer_for_an_existing_and_a_missing_id(
        client: TestClient, method: str, template: str, headers: dict[str, str]) -> None:
    make_user("ada@example.com")  # accounts exist: no development mode
    existing = stored_dry_run("the-ticket")
    seen = {_answer(client, method, template.format(id=i), headers) for i in (existing, MISSING)}
    assert len(seen) == 1, seen
    assert next(iter(seen))[0] in (303, 401, 403), seen
