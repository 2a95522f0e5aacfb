"""Saved metric mappings belong to whoever saved them (issue 55: they were global per file name;
another user overwrote one, reward and KL swapped, and the owner's next import read the swapped
values without a word; another user could delete it). And a mapping that sends two keys to one
name is refused at the field instead of dropping one of them."""

from __future__ import annotations

from fastapi.testclient import TestClient

from bench.simulated_logs import ODD_KEYS, handwritten_stalled
from tests.app.conftest import one
from tests.app.test_auth import api_key, login, make_user

LOG = handwritten_stalled(keys=ODD_KEYS).encode()
MINE = "Div=kl, Score=reward"


def _import(client: TestClient, who: dict[str, str], **data: object) -> dict:
    reply = client.post("/api/imports", files={"log": ("loop.log", LOG)}, data=data,
                        headers=who)
    assert reply.status_code == 201, reply.text
    run_id = reply.json()["runs"][0]["id"]
    return client.get(f"/api/runs/{run_id}", headers=who).json()["spec"]


def _accounts(client: TestClient) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(owner, other, admin) API keys."""
    for email, admin in (("owner@example.com", False), ("other@example.com", False),
                         ("admin@example.com", True)):
        make_user(email, admin=admin)
    return api_key("owner@example.com"), api_key("other@example.com"), \
        api_key("admin@example.com")


def test_another_user_can_neither_overwrite_nor_forget_a_saved_mapping(
        client: TestClient) -> None:
    owner, other, _ = _accounts(client)
    _import(client, owner, map=["Score=reward", "Div=kl"], save_map="true")
    # the other user saves the swap under the same file name, then "forgets" it
    _import(client, other, map=["Score=kl", "Div=reward"], save_map="true")
    assert _import(client, owner)["mapping"] == MINE
    assert _import(client, other)["mapping"] == "Div=reward, Score=kl"  # theirs, for them
    client.post("/api/imports", files={"log": ("loop.log", LOG)}, headers=other,
                data={"save_map": "true"})  # an empty mapping, remembered: forgets theirs
    spec = _import(client, owner)
    assert spec["mapping"] == MINE and spec["mapping_saved_for"] == "loop.log"
    assert "mapping_saved_for" not in _import(client, other)


def test_saved_mappings_are_listed_to_their_owner_and_all_to_an_admin(
        client: TestClient) -> None:
    owner, other, admin = _accounts(client)
    _import(client, owner, map=["Score=reward", "Div=kl"], save_map="true")
    _import(client, other, map=["Score=kl"], save_map="true")
    mine = client.get("/api/imports/mappings", headers=owner).json()
    assert [(m["source"], m["mapping"]) for m in mine] == [("loop.log", MINE)]
    everyone = client.get("/api/imports/mappings", headers=admin).json()
    assert sorted(m["mapping"] for m in everyone) == [MINE, "Score=kl"]
    assert all("owner" in m for m in everyone)


def test_two_keys_to_one_name_are_refused_at_the_field(client: TestClient) -> None:
    reply = client.post("/api/imports", files={"log": ("loop.log", LOG)},
                        data={"map": ["Score=reward", "Div=reward"], "save_map": "true"})
    assert reply.status_code in (400, 422), reply.text
    assert "'Score' and 'Div' both map to 'reward'" in reply.text
    page = client.post("/runs/import", files={"log": ("loop.log", LOG)},
                       data={"map": "Score=reward, Div=reward", "save_map": "true"})
    assert page.status_code == 422
    assert "both map to" in one(page.text, "#e-map").text
    assert client.get("/api/imports/mappings").json() == []  # nothing remembered


def test_the_form_remembers_per_user(client: TestClient) -> None:
    """The import form (a browser session, not a key) saves under the logged-in user."""
    owner, other, _ = _accounts(client)
    assert login(client, "owner@example.com").status_code == 303
    page = client.post("/runs/import", files={"log": ("loop.log", LOG)},
                       data={"map": MINE, "save_map": "true"}, follow_redirects=False)
    assert page.status_code == 303, page.text
    client.cookies.clear()
    assert "mapping_saved_for" not in _import(client, other)
    assert _import(client, owner)["mapping"] == MINE
