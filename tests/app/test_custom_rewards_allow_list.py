"""``custom`` rewards name only functions the deployment registered (issue 22, point 3).

``os:system``, ``subprocess:check_output`` and ``builtins:eval`` were accepted by launch and dry
run, and the worker imported and called them. Now launch and dry run answer 422 at the reward's
``path``; ``GET /api/rewards`` and the new-run form list what is allowed; a registered function
launches. (The tests' deployment registers ``tests.rewards.custom_reward:shout`` through
``GRPODECK_CUSTOM_REWARDS``, see tests/conftest.py.)
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import SPEC

HOSTILE = ["os:system", "subprocess:check_output", "builtins:eval"]
REGISTERED = "tests.rewards.custom_reward:shout"


def with_custom(path: str) -> dict:  # type: ignore[type-arg]
    return {**SPEC, "rewards": [{"name": "custom", "weight": 1.0, "params": {"path": path}}]}


@pytest.mark.parametrize("url", ["/api/runs", "/api/dry-runs"])
@pytest.mark.parametrize("path", HOSTILE)
def test_an_unregistered_function_is_refused_with_422_at_its_field(
        client: TestClient, url: str, path: str) -> None:
    reply = client.post(url, json=with_custom(path))
    assert reply.status_code == 422, reply.text
    problem = reply.json()["detail"][0]
    assert problem["loc"][:2] == ["body", "rewards"]
    assert "custom.path must be a custom reward this deployment registered" in problem["msg"]
    assert repr(path) in problem["msg"] and REGISTERED in problem["msg"]
    assert client.get("/api/runs").json() == []


def test_the_allowed_rewards_are_listed_and_offered_in_the_form(client: TestClient) -> None:
    listing = client.get("/api/rewards").json()
    assert {r["name"] for r in listing["rewards"]} >= {"custom", "unit_tests"}
    assert [a["path"] for a in listing["custom"]["allowed"]] == [REGISTERED]
    assert listing["custom"]["allowed"][0]["source"] == "GRPODECK_CUSTOM_REWARDS"
    page = client.get("/runs/new").text
    assert f'<option value="path={REGISTERED}">' in page


def test_the_form_shows_the_refusal_at_the_reward_params(client: TestClient) -> None:
    form = {"name": "hostile", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
            "reward_0_name": "custom", "reward_0_weight": "1", "reward_0_params": "path=os:system",
            "num_generations": "4", "max_steps": "3"}
    page = client.post("/runs/new", data=form)
    assert page.status_code == 422
    assert "is not one" in page.text and client.get("/api/runs").json() == []


@pytest.mark.parametrize("url", ["/api/runs", "/api/dry-runs"])
def test_a_registered_function_is_accepted(client: TestClient, url: str) -> None:
    reply = client.post(url, json=with_custom(REGISTERED))
    assert reply.status_code in (200, 201, 202), reply.text


def test_a_module_prefix_allows_its_public_functions_only(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_CUSTOM_REWARDS", "tests.rewards")
    assert client.post("/api/runs", json=with_custom(REGISTERED)).status_code == 201
    for refused in ("tests.rewards.custom_reward:_private", "tests.rewardsx:f", "tests:f"):
        assert client.post("/api/runs", json=with_custom(refused)).status_code == 422, refused
