"""Presets: the three experiments (and the group-size sweep) defined once, valid as run specs,
served as JSON, and filling the new-run form so that launching it unchanged runs the preset."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from grpodeck.contract.presets import PRESETS
from grpodeck.contract.spec import RunSpec
from tests.app.conftest import one
from tests.app.test_clone import submitted

NAMES = ["length-20", "unit-tests", "reward-hacking", "group-size-sweep"]


@pytest.mark.parametrize("name", NAMES)
def test_every_preset_is_a_valid_run_spec(name: str) -> None:
    RunSpec.model_validate(PRESETS[name].spec)


def test_reward_hacking_trains_on_a_proxy_and_watches_the_tests() -> None:
    rewards = RunSpec.model_validate(PRESETS["reward-hacking"].spec).rewards
    trained = [r.name for r in rewards if r.weight != 0]
    watched = [r.name for r in rewards if r.weight == 0]
    assert trained == ["code_block_count"] and watched == ["unit_tests"]
    easy = RunSpec.model_validate(PRESETS["unit-tests"].spec)
    assert easy.dataset == "builtin:easy-python" and easy.rewards[0].name == "unit_tests"
    assert PRESETS["group-size-sweep"].sweep == {"num_generations": [2, 8, 16]}


def test_api_lists_the_presets(client: TestClient) -> None:
    reply = client.get("/api/presets")
    assert reply.status_code == 200
    assert [p["name"] for p in reply.json()] == NAMES
    assert [p["label"] for p in reply.json()][:3] == [
        "Length 20", "Unit tests on easy-python", "Reward hacking demo"]
    assert client.get("/api/presets/reward-hacking").json()["spec"] == \
        PRESETS["reward-hacking"].spec
    missing = client.get("/api/presets/nope")
    assert missing.status_code == 404 and "known: length-20" in missing.json()["detail"]


@pytest.mark.parametrize("name", ["reward-hacking", "unit-tests"])
def test_form_filled_from_a_preset_launches_the_preset(client: TestClient, name: str) -> None:
    page = client.get(f"/runs/new?preset={name}")
    assert page.status_code == 200
    picked = one(page.text, "#f-preset option[selected]")
    assert picked["value"] == name
    data = submitted(one(page.text, "#run-form"))
    launched = client.post("/runs/new", data=data, follow_redirects=False)
    assert launched.status_code == 303, launched.text
    run_id = int(launched.headers["location"].rsplit("/", 1)[1])
    spec = client.get(f"/api/runs/{run_id}").json()["spec"]
    expected = RunSpec.model_validate(PRESETS[name].spec).model_dump(mode="json")
    assert spec == expected


def test_unknown_preset_in_the_form_is_a_404(client: TestClient) -> None:
    assert client.get("/runs/new?preset=nope").status_code == 404
