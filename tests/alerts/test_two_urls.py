"""The two addresses of a deployment: people open ``GRPODECK_PUBLIC_URL`` (alert links), workers
report to ``GRPODECK_REPORT_URL`` (the task message). In compose they differ (a public name vs
``http://web:8000`` on the internal network); one setting for both sent people to ``web:8000``."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from kombu import Connection

from app.alerts.sender import Sender
from app.core.config import get_settings
from tests.alerts.helpers import SPEC, alerts, report, send_until, zero_spread
from tests.alerts.receivers import HttpReceiver

PUBLIC = "https://deck.example.com"
INTERNAL = "http://web:8000"


def queued_messages() -> dict[str, dict[str, Any]]:
    """Every task message on the real broker, by task name: their keyword arguments."""
    settings = get_settings()
    found: dict[str, dict[str, Any]] = {}
    with Connection(settings.broker_url) as conn:
        queue = conn.SimpleQueue(settings.queue)
        while True:
            try:
                message = queue.get(timeout=1)
            except queue.Empty:
                break
            found[message.headers["task"]] = message.decode()[1]  # protocol 2: [args, kwargs, embed]
            message.ack()
        queue.close()
    return found


def test_alert_links_use_the_public_url_and_task_messages_the_report_url(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    alert_env(public_url=PUBLIC, report_url=INTERNAL, alert_urls=f"webhook+{receiver.url('/hook')}")
    launched = client.post("/api/runs", json={**SPEC, "name": "two-urls"})
    assert launched.status_code == 201, launched.text
    run_id = launched.json()["id"]
    assert client.post("/api/dry-runs", json=SPEC).status_code in (200, 201, 202)
    messages = queued_messages()
    train = messages["grpodeck.train_run"]
    assert train["run_id"] == run_id and train["report_url"] == INTERNAL
    assert messages["grpodeck.dry_run"]["report_url"] == INTERNAL
    # the worker's side: claim with the message's ticket, then report a problem
    claimed = client.post(f"/api/runs/{run_id}/claim", json={"pid": 1},
                          headers={"Authorization": f"Bearer {train['ticket']}"})
    assert claimed.status_code == 200, claimed.text
    report(client, run_id, {"Authorization": f"Bearer {claimed.json()['token']}"},
           zero_spread(range(1, 61)))
    alert = alerts(client, run_id=run_id)[0]
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: len(receiver.bodies("/hook")) == 1)
    finally:
        sender.close()
    item = receiver.bodies("/hook")[0]["alerts"][0]
    assert item["url"] == f"{PUBLIC}/runs/{run_id}#finding-{alert['finding_id']}"
    assert item["chart_url"].startswith(f"{PUBLIC}/runs/{run_id}?")
    assert item["rollouts_url"].startswith(f"{PUBLIC}/runs/{run_id}/rollouts")
    assert INTERNAL not in json.dumps(receiver.bodies("/hook")[0])


def test_the_report_url_defaults_to_the_public_url(alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(public_url=PUBLIC)
    assert get_settings().worker_report_url == PUBLIC
