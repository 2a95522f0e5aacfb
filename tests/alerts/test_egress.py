"""The outbound URL policy with real receivers on loopback (which it refuses unless allowed):
at save time a 422 at the field (settings form, ``POST /api/runs`` ``alerts.urls``, the launch
form), at send time no connection at all, no redirect followed to a refused address, and a name
allowed when saved but not when sent is refused when sent (the check is on the connection)."""

from __future__ import annotations

import socket

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.alerts import egress
from app.alerts.models import AlertConfig, Delivery
from app.alerts.sender import Sender
from app.core.db import get_sessionmaker
from app.runs.models import Run
from tests.alerts.helpers import send_until
from tests.alerts.receivers import HttpReceiver
from tests.conftest import tiny_spec

REFUSED = [
    ("webhook+http://169.254.169.254/latest/meta-data", "metadata"),
    ("json://[fd00:ec2::254]/x", "metadata"),
    ("webhook+http://metadata.google.internal/computeMetadata/v1/", "metadata"),
    ("json://10.0.0.5/x", "private"),
    ("webhook+http://[::1]:8298/x", "loopback"),
    ("json://0.0.0.0:8298/x", "unspecified"),
    ("json://224.0.0.1/x", "multicast"),
    ("json://240.0.0.1/x", "reserved"),
    ("webhook+http://[::ffff:127.0.0.1]:8298/x", "loopback"),
    ("mailto://u:p@example.com?smtp=192.168.1.1", "private"),
    ("file:///etc/passwd", "not allowed"),
    ("windows://", "not allowed"),
    ("dbus://", "not allowed"),
]


def saved() -> list[str]:
    with get_sessionmaker()() as db:
        config = db.get(AlertConfig, 1)
        return list(config.urls) if config else []


def sent_jobs() -> list[Delivery]:
    with get_sessionmaker()() as db:
        return list(db.scalars(select(Delivery)))


def test_loopback_is_refused_at_save_unless_the_admin_allows_it(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="")
    url = f"webhook+{receiver.url('/hook')}"
    page = client.post("/settings/alerts", data={"urls": url})
    assert page.status_code == 422 and 'id="e-urls"' in page.text
    assert "loopback" in page.text and "GRPODECK_ALERT_ALLOW_HOSTS" in page.text
    assert saved() == []
    alert_env(alert_allow_hosts="127.0.0.1")
    assert client.post("/settings/alerts", data={"urls": url}).status_code == 200
    assert saved() == [url]


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_metadata_private_and_local_destinations_are_refused_at_save(
        client: TestClient, alert_env, url: str, why: str) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="")
    page = client.post("/settings/alerts", data={"urls": url})
    assert page.status_code == 422 and why in page.text
    assert saved() == []


def test_a_runs_own_loopback_url_is_a_422_at_its_field_and_nothing_is_stored(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="")
    urls = ["json://hooks.example.com/ok", f"webhook+{receiver.url('/hook')}"]
    reply = client.post("/api/runs", json=tiny_spec(alerts={"urls": urls}))
    assert reply.status_code == 422, reply.text
    [error] = reply.json()["detail"]
    assert error["loc"] == ["body", "alerts", "urls", 1] and "loopback" in error["msg"]
    metadata = client.post("/api/runs", json=tiny_spec(alerts={
        "urls": ["webhook+http://169.254.169.254/latest/meta-data"]}))
    assert metadata.status_code == 422 and "metadata" in metadata.text
    form = client.post("/runs/new", data={"name": "x", "model": "builtin:tiny-random",
                                          "reward_0_name": "length_target",
                                          "alert_urls": urls[1]})
    assert form.status_code == 422 and 'id="e-alert_urls"' in form.text
    assert "loopback" in form.text
    with get_sessionmaker()() as db:
        assert db.scalar(select(func.count()).select_from(Run)) == 0
    alert_env(alert_allow_hosts="127.0.0.1")
    assert client.post("/api/runs", json=tiny_spec(alerts={"urls": urls})).status_code == 201


def test_a_refused_url_from_the_environment_is_never_connected_to(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="", alert_max_attempts="1",
              alert_urls=f"webhook+{receiver.url('/hook')} {receiver.url('/apprise', 'json')}")
    assert "queued for 2 destination" in client.post("/settings/alerts/test").text
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: [j.status for j in sent_jobs()] == ["dead", "dead"])
    finally:
        sender.close()
    assert receiver.attempts == []  # not one connection
    assert all("outbound URL policy" in (j.last_error or "") for j in sent_jobs())


def test_a_name_allowed_when_saved_but_not_when_sent_is_refused_at_send(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="localhost", alert_max_attempts="1")
    url = f"webhook+http://localhost:{receiver.port}/hook"
    assert client.post("/settings/alerts", data={"urls": url}).status_code == 200
    alert_env(alert_allow_hosts="")  # what the name resolves to is checked again when sending
    client.post("/settings/alerts/test")
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: [j.status for j in sent_jobs()] == ["dead"])
    finally:
        sender.close()
    assert receiver.attempts == [] and "loopback" in (sent_jobs()[0].last_error or "")


def test_a_redirect_to_a_refused_address_is_not_followed(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    receiver.redirect = {"/apprise": receiver.url("/inner")}  # localhost -> 127.0.0.1
    alert_env(alert_allow_hosts="localhost", alert_max_attempts="1",
              alert_urls=f"json://localhost:{receiver.port}/apprise")
    client.post("/settings/alerts/test")
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: [j.status for j in sent_jobs()] == ["dead"])
    finally:
        sender.close()
    assert receiver.attempts == ["/apprise"]  # the allowed host was reached, its redirect not


def test_the_guard_checks_the_address_each_connection_uses(
        receiver: HttpReceiver, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_allow_hosts="")
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=5):
        pass  # outside a delivery nothing changes
    with egress.guard(), pytest.raises(egress.EgressRefused, match="loopback"):
        socket.create_connection(("localhost", receiver.port), timeout=5)
    alert_env(alert_allow_hosts="127.0.0.0/8")
    with egress.guard(), socket.create_connection(("127.0.0.1", receiver.port), timeout=5):
        pass
