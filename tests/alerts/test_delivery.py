"""Delivery to real receivers on loopback: the JSON webhook, Apprise json:// and mailto://
(aiosmtpd), retries with the reason recorded, dead deliveries on /alerts, a hung receiver that
delays only itself, and a digest when many runs alert at once."""

from __future__ import annotations

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.alerts.models import Delivery, DeliveryAttempt
from app.alerts.sender import Sender
from app.core.db import get_sessionmaker
from tests.alerts.helpers import alerts, report, send_until, start_run, zero_spread
from tests.alerts.receivers import HttpReceiver


def delivered(status: str = "sent") -> list[Delivery]:
    with get_sessionmaker()() as db:
        return list(db.scalars(select(Delivery).where(Delivery.status == status)))


def test_webhook_and_apprise_json_retry_after_a_failed_first_attempt(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    receiver.fail_first = {"/hook": 1, "/apprise": 1}
    alert_env(alert_urls=f"webhook+{receiver.url('/hook')} {receiver.url('/apprise', 'json')}")
    run_id, headers = start_run(client, name="spread-run")
    report(client, run_id, headers, zero_spread(range(1, 61)))
    alert = alerts(client, run_id=run_id)[0]
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: len(delivered()) == 2)
    finally:
        sender.close()
    assert receiver.attempts.count("/hook") == 2 and receiver.attempts.count("/apprise") == 2
    hook = receiver.bodies("/hook")
    assert len(hook) == 1
    body = hook[0]
    assert body["schema"] == "grpodeck.alerts/1" and body["kind"] == "alerts"
    item = body["alerts"][0]
    assert item["run_id"] == run_id and item["run_name"] == "spread-run"
    assert item["category"] == "zero_reward_spread" and item["severity"] == alert["severity"]
    # what was true when it opened (the record has moved on with later batches)
    assert item["first_step"] == alert["first_step"] and item["last_step"] <= alert["last_step"]
    assert item["summary"] and item["evidence"] and item["action"]
    assert item["url"] == f"http://deck.example/runs/{run_id}#finding-{alert['finding_id']}"
    assert item["rollouts_url"].endswith(f"/runs/{run_id}/rollouts?step={item['last_step']}"
                                         f"&within={item['first_step']}-{item['last_step']}")
    apprise_body = receiver.bodies("/apprise")[0]  # Apprise's own JSON shape
    assert "spread-run" in apprise_body["title"] and item["summary"] in apprise_body["message"]
    assert item["url"] in apprise_body["message"] and "First thing to try" in apprise_body["message"]
    with get_sessionmaker()() as db:
        tries = db.scalars(select(DeliveryAttempt).order_by(DeliveryAttempt.id)).all()
    assert sorted((t.number, t.ok) for t in tries) == [(1, False), (1, False), (2, True), (2, True)]
    reasons = [t.error for t in tries if not t.ok]
    assert any("HTTP 500" in r for r in reasons) and any("error=500" in r for r in reasons)
    listed = alerts(client, run_id=run_id)[0]["deliveries"]
    assert sorted((d["status"], d["attempts"]) for d in listed) == [("sent", 2), ("sent", 2)]


def test_a_delivery_that_keeps_failing_is_dead_and_shown_on_alerts(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    receiver.fail_first = {"/down": 100}
    alert_env(alert_urls=f"webhook+{receiver.url('/down')}", alert_max_attempts="3")
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 61)))
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: len(delivered("dead")) == 1)
    finally:
        sender.close()
    assert receiver.attempts.count("/down") == 3
    job = delivered("dead")[0]
    assert job.attempts == 3 and "HTTP 500" in (job.last_error or "")
    page = client.get("/alerts").text
    assert "failed for good" in page and "HTTP 500" in page


def test_the_email_reaches_a_real_smtp_server(client: TestClient, alert_env, smtp) -> None:  # type: ignore[no-untyped-def]
    controller, box = smtp
    alert_env(alert_urls=f"mailto://127.0.0.1:{controller.port}?from=deck@example.com"
                         "&to=oncall@example.com&mode=insecure")
    run_id, headers = start_run(client, name="mail-run")
    report(client, run_id, headers, zero_spread(range(1, 61)))
    alert = alerts(client, run_id=run_id)[0]
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: len(box.messages) >= 1)
    finally:
        sender.close()
    mail = box.messages[0]
    assert "oncall@example.com" in mail["X-RcptTo"] and "mail-run" in mail["Subject"]
    text = mail.get_payload(decode=True) if not mail.is_multipart() else \
        mail.get_payload()[0].get_payload(decode=True)
    text = text.decode()
    assert alert["summary"][:60] in " ".join(text.split())
    assert f"http://deck.example/runs/{run_id}#finding-{alert['finding_id']}" in text


def test_a_hung_receiver_delays_only_its_own_deliveries(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    receiver.hang = {"/hung"}
    alert_env(alert_urls=f"webhook+{receiver.url('/hung')} webhook+{receiver.url('/fine')}",
              alert_timeout_seconds="60")
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 61)))
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: receiver.bodies("/fine") and receiver.hanging == 1)
        assert receiver.hanging == 1  # still stuck on the hung receiver...
        later, h2 = start_run(client, name="second")  # ...while new alerts keep flowing
        report(client, later, h2, zero_spread(range(1, 61)))
        send_until(sender, lambda: len(receiver.bodies("/fine")) == 2)
        assert receiver.attempts.count("/hung") == 1  # busy destination: not claimed again
    finally:
        receiver.release.set()
        sender.close()


def test_many_runs_alerting_at_once_get_one_digest(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=f"webhook+{receiver.url('/hook')}", alert_digest_runs="3")
    runs = [start_run(client, name=f"run-{i}") for i in range(4)]
    for run_id, headers in runs:
        report(client, run_id, headers, zero_spread(range(1, 61)))
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: len(delivered()) == 4)
    finally:
        sender.close()
    bodies = receiver.bodies("/hook")
    assert len(bodies) == 1 and bodies[0]["kind"] == "digest"
    assert sorted(r["name"] for r in bodies[0]["runs"]) == [f"run-{i}" for i in range(4)]
    assert all(f"run-{i}" in bodies[0]["text"] for i in range(4))


def test_send_test_alert_from_the_settings_page(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls="")
    page = client.post("/settings/alerts", data={"urls": "not a url"})
    assert page.status_code == 422 and "Nothing was saved" in page.text
    saved = client.post("/settings/alerts", data={"urls": receiver.url("/apprise", "json")})
    assert saved.status_code == 200 and "Saved 1 destination" in saved.text
    queued = client.post("/settings/alerts/test")
    assert "queued for 1 destination" in queued.text
    sender = Sender("test-sender")
    try:  # the receiver has the body a moment before the sender records "sent": wait for both
        send_until(sender, lambda: receiver.bodies("/apprise") and delivered("sent"))
    finally:
        sender.close()
    assert "test alert" in receiver.bodies("/apprise")[0]["title"]
    page = client.get("/settings/alerts").text
    assert '<td class="delivery-status">delivered</td>' in page and f"json://127.0.0.1:{receiver.port}/***" in page
    assert "/apprise" not in page  # the saved URL is shown masked: scheme and host only


def test_a_test_alert_turns_delivered_on_the_settings_page_without_a_reload(
        client: TestClient, alert_env, receiver: HttpReceiver) -> None:  # type: ignore[no-untyped-def]
    """Issue 34: the inline answer showed "pending" forever; the table now polls itself while
    a test waits and stops once none does."""
    alert_env(alert_urls=receiver.url("/apprise", "json"))
    inline = client.post("/settings/alerts/test", headers={"HX-Request": "true"}).text
    table = BeautifulSoup(inline, "html.parser").select_one("#test-deliveries")
    assert table is not None and table.get("hx-get") == "/settings/alerts/_tests"
    assert table.get("hx-target") == "this"  # not the enclosing form's target
    assert [td.text for td in table.select(".delivery-status")] == ["pending"]
    sender = Sender("test-sender")
    try:
        send_until(sender, lambda: delivered("sent"))
    finally:
        sender.close()
    polled = BeautifulSoup(client.get("/settings/alerts/_tests").text, "html.parser")
    fragment = polled.select_one("#test-deliveries")
    assert fragment is not None and [td.text for td in fragment.select(".delivery-status")] == [
        "delivered"]
    assert fragment.get("hx-trigger") is None  # nothing waits: polling stops
