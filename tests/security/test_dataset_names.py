"""Issue 22 point 6: dataset names are checked by an allow-list of characters at the API and
the form (422 at the dataset field), so URL-encoded climbs, URLs, home-relative and absolute
paths are refused before anything is stored or queued."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import SPEC

HOSTILE = ["..%2f..", "..%2f..%2fetc%2fpasswd.jsonl", "file:///etc/passwd", "~/x.jsonl",
           "/etc/passwd", "/etc/x.jsonl", "a/../../x.jsonl", "%2e%2e/x.jsonl",
           "https://example.com/x.jsonl", "org/na me", ".hidden.jsonl", "org/x\n.jsonl"]
ACCEPTED = ["builtin:arithmetic", "trl-lib/tldr", "openai/gsm8k", "my-prompts.jsonl",
            "team/prompts_v2.json"]


def _field_error(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 422, response.text
    [error] = [e for e in response.json()["detail"] if e["loc"][-1] == "dataset"]
    return error["msg"]


@pytest.mark.one_backend
@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_dataset_name_is_422_at_the_field_and_nothing_is_queued(
        client: TestClient, name: str) -> None:
    assert _field_error(client.post("/api/runs", json={**SPEC, "dataset": name}))
    assert _field_error(client.post("/api/dry-runs", json={**SPEC, "dataset": name}))
    form = {"name": "x", "model": "builtin:tiny-random", "dataset": name,
            "reward_0_name": "length_target", "reward_0_params": "target=20"}
    page = client.post("/runs/new", data=form)
    assert page.status_code == 422 and 'id="e-dataset"' in page.text
    assert client.get("/api/runs").json() == []
    assert client.get("/api/dry-runs/1").status_code == 404  # no dry run stored either


@pytest.mark.one_backend
def test_builtins_hub_ids_and_uploaded_names_are_accepted(client: TestClient) -> None:
    for name in ACCEPTED:
        reply = client.post("/api/runs", json={**SPEC, "dataset": name})
        assert reply.status_code == 201, (name, reply.text)
