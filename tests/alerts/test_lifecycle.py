"""Alert records derived from the stored (stabilised) findings' transitions, on SQLite and
PostgreSQL: one alert per condition, updates, resolve, reopen, run end, rules, ack, mute."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.alerts.models import Delivery
from app.core.db import get_sessionmaker
from app.diagnostics.model import severity_rank
from app.ingest.watch import check_live_runs
from app.runs.models import Run
from tests.alerts.helpers import alerts, finish, healthy, report, start_run, zero_spread

HOOK = "webhook+http://127.0.0.1:9/hook"


def jobs(run_id: int) -> list[Delivery]:
    with get_sessionmaker()() as db:
        return list(db.scalars(select(Delivery).where(Delivery.run_id == run_id)
                               .order_by(Delivery.id)))


def test_a_stalled_run_opens_one_alert_not_one_per_batch(client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 81)))  # 8 batches
    found = alerts(client, run_id=run_id)
    categories = [a["category"] for a in found]
    assert "zero_reward_spread" in categories and set(categories) <= {"zero_reward_spread",
                                                                       "stalled"}
    assert len(categories) == len(set(categories))  # never a twin for the same condition
    alert = next(a for a in found if a["category"] == "zero_reward_spread")
    assert alert["state"] == "open" and alert["severity"] in ("warning", "critical")
    assert alert["last_step"] == 80  # later batches moved the step range along
    assert alert["history"][0]["event"] == "opened"
    written = jobs(run_id)
    assert {j.event for j in written} == {"opened"}  # later batches only update the record
    assert sorted(i for j in written for i in j.alert_ids) == sorted(a["id"] for a in found)
    payload = next(p for j in written for p in j.payload["alerts"] if p["id"] == alert["id"])
    assert payload["url"] == f"http://deck.example/runs/{run_id}#finding-{alert['finding_id']}"
    assert payload["summary"] and payload["evidence"] and payload["action"]


def test_nothing_is_alerted_while_a_finding_is_only_being_confirmed(client: TestClient,
                                                                    alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 41), frac=0.9))  # info: confirming
    assert alerts(client, run_id=run_id) == [] and jobs(run_id) == []


def test_an_exact_signal_is_alerted_at_once(client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    """Every group without reward spread on each of 3 rows needs no confirmation (issue 23):
    a 5-step smoke run is over before three evaluations could confirm it."""
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 4)), batch=3)
    (alert,) = alerts(client, run_id=run_id)
    assert (alert["category"], alert["severity"], alert["state"]) == (
        "zero_reward_spread", "critical", "open")
    assert [j.event for j in jobs(run_id)] == ["opened"]


def test_resolves_with_its_finding_and_reopens_as_the_same_alert(client: TestClient,
                                                                 alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 61)))
    first = alerts(client, state="open", run_id=run_id)[0]
    report(client, run_id, headers, healthy(range(61, 400)))
    resolved = alerts(client, state="resolved", run_id=run_id)
    assert [a["id"] for a in resolved] == [first["id"]]
    assert resolved[0]["resolved_reason"] == "finding resolved"
    assert alerts(client, state="open", run_id=run_id) == []
    report(client, run_id, headers, zero_spread(range(400, 700)))
    again = [a for a in alerts(client, state="open", run_id=run_id)
             if a["category"] == "zero_reward_spread"]  # (the reward falling is a new one)
    assert [a["id"] for a in again] == [first["id"]]  # the same condition, the same alert
    events = [h["event"] for h in again[0]["history"]]
    assert events[0] == "opened" and "resolved" in events and events[-1] == "reopened"
    sent = [p for j in jobs(run_id) for p in j.payload["alerts"] if p["id"] == first["id"]]
    assert [p["event"] for p in sent] == ["opened", "resolved", "reopened"]
    assert sent[1]["duration_seconds"] is not None
    resolved_job = next(j for j in jobs(run_id) if j.event == "resolved")
    assert "lasted" in resolved_job.payload["text"]


def test_after_the_reopen_window_a_new_alert_opens(client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK, alert_reopen_seconds="0")
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 61)))
    report(client, run_id, headers, healthy(range(61, 400)))
    report(client, run_id, headers, zero_spread(range(400, 700)))
    found = alerts(client, run_id=run_id)
    spread = [a for a in found if a["category"] == "zero_reward_spread"]
    assert sorted(a["state"] for a in spread) == ["open", "resolved"]


def test_the_run_ending_resolves_its_alerts_with_how_long_they_lasted(client: TestClient,
                                                                      alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 61)))
    finish(client, run_id, headers)
    found = alerts(client, run_id=run_id)
    spread = [a for a in found if a["category"] == "zero_reward_spread"]
    assert [(a["state"], a["resolved_reason"]) for a in spread] == [("resolved", "run succeeded")]
    # the final evaluation also confirmed the stall: both changes go out in one message
    assert {(a["category"], a["resolved_reason"]) for a in found if a not in spread} == {
        ("stalled", "found when the run succeeded")}
    assert [j.event for j in jobs(run_id)] == ["opened", "changes"]
    text = jobs(run_id)[-1].payload["text"]
    assert "lasted" in text and "found when the run ended" in text


def test_rules_min_severity_ignored_categories_and_extra_destinations(client: TestClient,
                                                                      alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    ignoring, h1 = start_run(client, alerts={"ignore": ["zero_reward_spread", "stalled"]})
    report(client, ignoring, h1, zero_spread(range(1, 81)))
    assert alerts(client, run_id=ignoring) == [] and jobs(ignoring) == []
    extra = "json://127.0.0.1:9/extra"
    strict, h2 = start_run(client, alerts={"min_severity": "critical", "urls": [extra]})
    report(client, strict, h2, zero_spread(range(1, 81)))
    found = alerts(client, run_id=strict)
    assert [a["severity"] for a in found] == ["critical"]  # the warning (stalled) is below it
    assert sorted(j.destination for j in jobs(strict)) == sorted([HOOK, extra])


def test_bad_rules_are_refused_with_the_field(client: TestClient) -> None:
    bad = client.post("/api/runs", json={"name": "x", "alerts": {"urls": ["nonsense"]}})
    assert bad.status_code == 422 and "Apprise" in bad.text
    form = client.post("/runs/new", data={"name": "x", "reward_0_name": "length_target",
                                          "alert_urls": "nonsense"})
    assert form.status_code == 422 and 'id="e-alert_urls"' in form.text


def test_ack_and_mutes(client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 61)))
    alert = alerts(client, run_id=run_id)[0]
    assert client.get("/api/alerts/count").json() == {"open_unacknowledged": 1}
    acked = client.post(f"/api/alerts/{alert['id']}/ack").json()
    assert acked["acknowledged_at"] and client.get("/api/alerts/count").json() == {
        "open_unacknowledged": 0}
    assert client.post("/api/alerts/999999/ack").status_code == 404
    muted, h2 = start_run(client)
    assert client.post("/api/alerts/mutes", json={"run_id": muted}).status_code == 200
    report(client, muted, h2, zero_spread(range(1, 61)))
    found = alerts(client, run_id=muted)
    assert found and found[0]["muted"] and jobs(muted) == []  # recorded, nobody messaged
    page = client.get("/alerts", params={"state": "all"}).text
    assert "acknowledged" in page and "muted" in page


def test_a_lost_run_fails_with_a_critical_alert(client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, healthy(range(1, 11)))
    assert check_live_runs(now=datetime.now(UTC) + timedelta(hours=6)) == 1
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "failed"
    found = alerts(client, run_id=run_id)
    assert [(a["category"], a["severity"], a["state"]) for a in found] == [
        ("lost", "critical", "open")]
    assert [j.payload["severity"] for j in jobs(run_id)][-1] == "critical"


def test_the_launch_form_stores_the_runs_alert_rules(client: TestClient) -> None:
    form = {"name": "form-rules", "model": "builtin:tiny-random", "reward_0_name": "length_target",
            "alert_urls": "json://127.0.0.1:9/a ntfy://topic", "alert_min_severity": "critical",
            "alert_ignore": "reward_hacking, stalled"}
    page = client.post("/runs/new", data=form, follow_redirects=False)
    assert page.status_code == 303, page.text
    run_id = int(page.headers["location"].rsplit("/", 1)[1])
    rules = client.get(f"/api/runs/{run_id}").json()["spec"]["alerts"]
    assert rules == {"urls": ["json://127.0.0.1:9/***", "ntfy://topic/***"],  # shown masked
                     "min_severity": "critical", "ignore": ["reward_hacking", "stalled"]}
    with get_sessionmaker()() as db:  # stored in full: the sender needs them
        assert db.get(Run, run_id).spec["alerts"]["urls"] == ["json://127.0.0.1:9/a",
                                                               "ntfy://topic"]


def test_a_severity_change_updates_the_same_alert_and_escalation_is_messaged(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client, alerts={"min_severity": "info"})
    report(client, run_id, headers, zero_spread(range(1, 61), frac=0.9))
    spread = [a for a in alerts(client, run_id=run_id) if a["category"] == "zero_reward_spread"]
    assert len(spread) == 1, spread  # info while confirming, then warning: still one alert
    events = [(h["event"], h["severity"]) for h in spread[0]["history"]]
    assert events == [("opened", "info"), ("escalated", "warning")]
    sent = [p["event"] for j in jobs(run_id) for p in j.payload["alerts"]
            if p["id"] == spread[0]["id"]]
    assert sent == ["opened", "escalated"]


def test_a_finding_confirmed_only_when_the_run_ends_is_still_messaged_once(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    """A short run whose problem is confirmed by the final evaluation: the person who launched
    it hears about it once, as found at the end (not opened then resolved a moment later)."""
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client)
    report(client, run_id, headers, zero_spread(range(1, 41)), batch=40)  # one evaluation: confirming
    assert alerts(client, run_id=run_id) == []
    finish(client, run_id, headers)
    found = alerts(client, run_id=run_id)
    assert [(a["category"], a["state"]) for a in found] == [("zero_reward_spread", "resolved")]
    assert found[0]["resolved_reason"] == "found when the run succeeded"
    assert [h["event"] for h in found[0]["history"]] == ["found_at_end"]
    written = jobs(run_id)
    assert [j.event for j in written] == ["found_at_end"]
    text = written[0].payload["text"]
    assert "found when the run ended" in text and "zero reward spread" in text


def test_an_info_alert_opened_during_the_run_and_found_again_at_its_end_stays_one_alert(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    """A run whose rules care about info: the zero-spread finding, shown as info while it is
    being confirmed, opens an info alert; the final evaluation shows it at its raw severity
    (warning). That is the alert already open ("already seen" at the end), resolved with the
    run, never a second, found-at-end alert for the same condition (issue 31)."""
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client, alerts={"min_severity": "info"})
    report(client, run_id, headers, zero_spread(range(1, 41), frac=0.9), batch=40)
    (opened,) = [a for a in alerts(client, run_id=run_id)
                 if a["category"] == "zero_reward_spread"]  # (beside an info dead component)
    assert (opened["severity"], opened["state"]) == ("info", "open")
    finish(client, run_id, headers)
    spread = [a for a in alerts(client, run_id=run_id) if a["category"] == "zero_reward_spread"]
    assert [(a["id"], a["state"], a["resolved_reason"]) for a in spread] == [
        (opened["id"], "resolved", "run succeeded")]
    # the final severity is recorded on the same alert (issue 34: one severity with the run
    # page), not messaged again
    assert [(h["event"], h["severity"]) for h in spread[0]["history"]] == [
        ("opened", "info"), ("escalated", "warning"), ("resolved", None)]
    assert [p["event"] for j in jobs(run_id) for p in j.payload["alerts"]
            if p["id"] == opened["id"]] == ["opened", "resolved"]


def _finding_severities(client: TestClient, run_id: int) -> dict[str, str]:
    """The worst severity per category the run page shows (active and resolved findings)."""
    reply = client.get(f"/api/runs/{run_id}/findings", params={"include_resolved": "true"})
    worst: dict[str, str] = {}
    for f in reply.json()["findings"]:
        worst[f["category"]] = max(worst.get(f["category"], f["severity"]), f["severity"],
                                   key=severity_rank)
    return worst


def test_an_alert_reads_the_severity_its_finding_shows_on_the_run_page(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    """Issue 34: a finding the final evaluation showed at a higher severity read critical on
    the run page and warning on /alerts. One source: the alert takes its finding's severity."""
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client, alerts={"min_severity": "info"})
    report(client, run_id, headers, zero_spread(range(1, 41), frac=0.9), batch=40)
    finish(client, run_id, headers)
    shown = _finding_severities(client, run_id)
    found = alerts(client, run_id=run_id)
    assert found and all(a["severity"] == shown[a["category"]] for a in found), (found, shown)
    page = client.get("/alerts", params={"state": "all", "run": run_id}).text
    for a in found:
        badge = page.split(f'id="alert-{a["id"]}"', 1)[1].split("sev-badge", 1)[1][:60]
        assert f'sev-{shown[a["category"]]}"' in badge, badge


def _external_run(client: TestClient) -> tuple[int, dict[str, str]]:
    """A run registered by DeckCallback from someone's own script (no worker, no queue)."""
    reply = client.post("/api/runs", json={"source": "external", "name": "my-script",
                                           "spec": {"model": "Qwen/Qwen2.5-0.5B"}})
    assert reply.status_code == 201, reply.text
    return reply.json()["id"], {"Authorization": f"Bearer {reply.json()['token']}"}


def test_a_run_reported_by_an_outside_script_pages_like_a_launched_one(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = _external_run(client)
    report(client, run_id, headers, zero_spread(range(1, 81)))
    found = alerts(client, run_id=run_id)
    assert "zero_reward_spread" in {a["category"] for a in found}
    assert {j.event for j in jobs(run_id)} == {"opened"}


def test_a_killed_outside_script_is_lost_with_a_critical_alert(
        client: TestClient, alert_env) -> None:  # type: ignore[no-untyped-def]
    alert_env(alert_urls=HOOK)
    run_id, headers = _external_run(client)
    report(client, run_id, headers, healthy(range(1, 11)))  # then the script is killed: silence
    assert check_live_runs(now=datetime.now(UTC) + timedelta(hours=6)) == 1
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "failed"
    assert [(a["category"], a["state"]) for a in alerts(client, run_id=run_id)] == [
        ("lost", "open")]
    assert jobs(run_id)[-1].payload["severity"] == "critical"


def _cut_rows(steps: range, clipped: bool) -> list[dict]:
    """Completions pinned at the 64-token cap; ``clipped``: the log also has clipped_ratio."""
    return [{"step": s, "metrics": {
        "reward": 0.2 + s / 400, "reward_std": 0.3, "frac_reward_zero_std": 0.0, "loss": 0.01,
        "rewards/length_target/mean": 0.2 + s / 400, "completions/mean_length": 63.0,
        **({"completions/clipped_ratio": 0.9} if clipped else {})}} for s in steps]


def test_a_finding_that_moves_to_another_metric_stays_one_alert(client: TestClient,
                                                                 alert_env) -> None:  # type: ignore[no-untyped-def]
    """Alert identity is (run, category); the metric is evidence (issue 23): truncation seen
    first on completions/mean_length, then on completions/clipped_ratio once that is logged,
    is one open alert, never 'resolved' and reopened while the problem goes on."""
    alert_env(alert_urls=HOOK)
    run_id, headers = start_run(client, max_completion_length=64)
    report(client, run_id, headers, _cut_rows(range(1, 61), clipped=False))
    (first,) = [a for a in alerts(client, run_id=run_id) if a["category"] == "truncation"]
    assert first["metric"] == "completions/mean_length"
    report(client, run_id, headers, _cut_rows(range(61, 201), clipped=True))
    found = [a for a in alerts(client, run_id=run_id) if a["category"] == "truncation"]
    assert [(a["id"], a["state"]) for a in found] == [(first["id"], "open")]
    assert found[0]["metric"] == "completions/clipped_ratio"  # the evidence moved with it
    assert "resolved" not in [h["event"] for h in found[0]["history"]]
    sent = [p["event"] for j in jobs(run_id) for p in j.payload["alerts"]
            if p["category"] == "truncation"]
    assert sent == ["opened"]
