"""Who may do what (the README's table, one test per cell), on real SQLite and PostgreSQL:
deployment settings are the admins', acknowledge/mute are the run owner's or an admin's, and
alert destinations are shown masked (scheme and host) to everyone, everywhere."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.alerts.models import OPEN, Alert, AlertConfig, AlertMute, Delivery
from app.core import config
from app.core.db import get_sessionmaker
from app.runs.models import Run
from tests.app.conftest import SPEC, one
from tests.app.test_auth import api_key, login, make_user
from tests.app.test_clone import submitted

ROLES = ("anonymous", "other", "owner", "admin")
SECRET_URL = "webhook+https://user:pa55word@hooks.example.com/T0K3N?key=s3cr3t"


def world(client: TestClient) -> tuple[dict[str, dict[str, str]], int, int]:
    """Three accounts (a run's owner, another user, an admin), the owner's run and an open
    alert on it: (headers per role, run id, alert id)."""
    make_user("owner@example.com")
    make_user("other@example.com")
    make_user("admin@example.com", admin=True)
    headers = {"anonymous": {}, **{r: api_key(f"{r}@example.com")
                                   for r in ("other", "owner", "admin")}}
    run_id = client.post("/api/runs", json=SPEC, headers=headers["owner"]).json()["id"]
    with get_sessionmaker()() as db:
        alert = Alert(run_id=run_id, category="zero_reward_spread", metric_key="",
                      severity="warning", state=OPEN, history=[])
        db.add(alert)
        db.commit()
        return headers, run_id, alert.id


def recorded() -> dict[str, Any]:
    """What the actions change, to see that a refused one changed nothing."""
    with get_sessionmaker()() as db:
        config = db.get(AlertConfig, 1)
        return {"saved": list(config.urls) if config else [],
                "tests": db.scalar(select(func.count()).select_from(Delivery)),
                "acked": db.scalars(select(Alert.acknowledged_at)).all(),
                "mutes": db.scalar(select(func.count()).select_from(AlertMute)),
                "runs": db.execute(select(Run.status, Run.cancel_requested_at)).all()}


# action -> (method, path with {run}/{alert}, form or json body, allowed roles)
ACTIONS: dict[str, tuple[str, str, dict[str, Any] | None, set[str]]] = {
    "see alerts": ("GET", "/api/alerts", None, {"other", "owner", "admin"}),
    "export a run's rows": ("GET", "/api/runs/{run}/export?format=csv", None,
                            {"other", "owner", "admin"}),  # as viewing the run
    "cancel a run": ("POST", "/api/runs/{run}/cancel", None, {"owner", "admin"}),
    "settings page": ("GET", "/settings/alerts", None, {"admin"}),
    "save destinations": ("POST", "/settings/alerts",
                          {"data": {"urls": "json://hooks.example.com/x"}}, {"admin"}),
    "send test alert": ("POST", "/settings/alerts/test", None, {"admin"}),
    "acknowledge (API)": ("POST", "/api/alerts/{alert}/ack", None, {"owner", "admin"}),
    "acknowledge (page)": ("POST", "/alerts/{alert}/ack", {"data": {"next": "/alerts"}},
                           {"owner", "admin"}),
    "mute (API)": ("POST", "/api/alerts/mutes", {"json": {"run_id": "{run}"}},
                   {"owner", "admin"}),
    "mute (page)": ("POST", "/alerts/mute", {"data": {"run_id": "{run}", "muted": "1"}},
                    {"owner", "admin"}),
}


def _fill(body: dict[str, Any] | None, run_id: int) -> dict[str, Any]:
    return {kind: {k: (run_id if v == "{run}" else v) for k, v in fields.items()}
            for kind, fields in (body or {}).items()}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", list(ACTIONS))
def test_who_may_do_what(client: TestClient, action: str, role: str,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_ALERT_URLS", "json://hooks.example.com/env")  # a test to send
    config.get_settings.cache_clear()
    headers, run_id, alert_id = world(client)
    method, path, body, allowed = ACTIONS[action]
    before = recorded()
    reply = client.request(method, path.format(alert=alert_id, run=run_id), headers=headers[role],
                           follow_redirects=False, **_fill(body, run_id))
    if role in allowed:
        assert reply.status_code in (200, 303), reply.text
        assert method == "GET" or recorded() != before
    else:
        expected = {"anonymous": {401, 303}}.get(role, {403})  # a page GET goes to the login
        assert reply.status_code in expected, (reply.status_code, reply.text)
        assert recorded() == before  # refused: nothing changed


def test_settings_links_are_shown_to_admins_only(client: TestClient) -> None:
    world(client)
    login(client, "other@example.com")
    for page in ("/alerts", "/runs/new"):
        assert 'href="/settings/alerts"' not in client.get(page).text
    login(client, "admin@example.com")
    for page in ("/alerts", "/runs/new"):
        assert 'href="/settings/alerts"' in client.get(page).text


def test_acknowledge_and_mute_buttons_are_shown_to_the_owner_and_admins_only(
        client: TestClient) -> None:
    world(client)
    for who, shown in (("other", False), ("owner", True), ("admin", True)):
        login(client, f"{who}@example.com")
        page = client.get("/alerts").text
        assert ("Acknowledge</button>" in page) is shown and ("Mute run" in page) is shown


def test_development_mode_is_the_admin(client: TestClient) -> None:
    assert client.get("/settings/alerts").status_code == 200  # no account yet, on loopback
    assert 'href="/settings/alerts"' in client.get("/alerts").text


def test_saved_destinations_are_shown_masked_and_a_masked_line_keeps_its_secret(
        client: TestClient) -> None:
    saved = client.post("/settings/alerts", data={"urls": SECRET_URL})
    assert saved.status_code == 200, saved.text
    page = client.get("/settings/alerts").text
    assert "webhook+https://hooks.example.com/***" in page
    assert not any(s in page for s in ("pa55word", "T0K3N", "s3cr3t"))
    shown = one(page, "#f-urls").get_text().strip()
    again = client.post("/settings/alerts", data={"urls": f"{shown}\njson://b.example.com/y"})
    assert again.status_code == 200, again.text
    with get_sessionmaker()() as db:  # the masked line stood for the stored URL, kept in full
        assert db.get(AlertConfig, 1).urls == [SECRET_URL, "json://b.example.com/y"]
    unknown = client.post("/settings/alerts", data={"urls": "json://c.example.com/***"})
    assert unknown.status_code == 422 and "type the full URL again" in unknown.text


def test_a_runs_own_destinations_are_masked_in_the_api_its_page_and_the_clone_form(
        client: TestClient) -> None:
    created = client.post("/api/runs", json={**SPEC, "alerts": {"urls": [SECRET_URL]}})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    shown = client.get(f"/api/runs/{run_id}").json()["spec"]["alerts"]["urls"]
    assert shown == ["webhook+https://hooks.example.com/***"]
    listed = client.get("/api/runs").json()[0]["spec"]["alerts"]["urls"]
    assert listed == shown
    form = client.get(f"/runs/new?from={run_id}").text
    for text in (client.get(f"/runs/{run_id}").text, form):
        assert not any(s in text for s in ("pa55word", "T0K3N", "s3cr3t"))
    data = submitted(one(form, "#run-form"))  # launched unchanged: the secret is kept
    assert data["alert_urls"] == "webhook+https://hooks.example.com/***"
    clone = client.post("/runs/new", data={**data, "name": "clone"}, follow_redirects=False)
    assert clone.status_code == 303, clone.text
    clone_id = int(clone.headers["location"].rsplit("/", 1)[1])
    with get_sessionmaker()() as db:
        assert db.get(Run, clone_id).spec["alerts"]["urls"] == [SECRET_URL]
    clone_page = client.get(f"/runs/{clone_id}").text  # its "what changed" table
    assert not any(s in clone_page for s in ("pa55word", "T0K3N"))
