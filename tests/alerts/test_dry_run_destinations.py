"""A dry run refuses the alert destinations a launch refuses, with the same validator (issue 33:
dry runs stored metadata and loopback URLs that "Launch" would then store as they are)."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import get_sessionmaker
from app.dryruns.models import DryRun
from tests.conftest import tiny_spec

METADATA = "webhook+http://169.254.169.254/latest/meta-data"
LOOPBACK = "webhook+http://127.0.0.1:9/hook"


def stored() -> int:
    with get_sessionmaker()() as db:
        return db.scalar(select(func.count()).select_from(DryRun)) or 0


def test_the_api_answers_422_at_the_refused_url_and_stores_nothing(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="")
    reply = client.post("/api/dry-runs", json=tiny_spec(alerts={
        "urls": ["json://hooks.example.com/ok", METADATA]}))
    assert reply.status_code == 422, reply.text
    [error] = reply.json()["detail"]
    assert error["loc"] == ["body", "alerts", "urls", 1] and "metadata" in error["msg"]
    assert stored() == 0


def test_the_form_shows_the_refusal_at_its_field_and_stores_nothing(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="")
    form = {"name": "x", "model": "builtin:tiny-random", "reward_0_name": "length_target",
            "alert_urls": LOOPBACK}
    page = client.post("/dry-runs", data=form)
    assert page.status_code == 422 and 'id="e-alert_urls"' in page.text
    assert "loopback" in page.text and stored() == 0


def test_an_allowed_destination_is_accepted(client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="127.0.0.1")
    reply = client.post("/api/dry-runs", json=tiny_spec(alerts={"urls": [LOOPBACK]}))
    assert reply.status_code == 202, reply.text
    assert stored() == 1
