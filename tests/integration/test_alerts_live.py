"""Alerts on a real stack: uvicorn + a Celery worker training builtin:tiny-random + the
`grpodeck scheduler` process delivering to real loopback receivers.

Figures (time from a finding being stored to the receiver getting it; ingest latency while a
receiver hangs) are printed; run with -s to see them."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

import httpx
import pytest

from app.core import config as config_module
from app.core import db as db_module
from tests.alerts.helpers import SPEC, zero_spread
from tests.alerts.receivers import HttpReceiver, running_receiver
from tests.integration.test_runs_end_to_end import TINY
from tests.stack import Stack


@pytest.fixture(scope="module")
def receiver() -> Iterator[HttpReceiver]:
    with running_receiver(hang={"/hung"}) as box:
        yield box


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, receiver: HttpReceiver) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("alerts")
    stack = Stack(f"sqlite:///{workdir / 'grpodeck.db'}", f"sqla+sqlite:///{workdir / 'broker.db'}",
                  workdir, scheduler=True, extra_env={
                      "GRPODECK_ALERT_URLS": f"webhook+{receiver.url('/hook')}",
                      "GRPODECK_ALERT_ALLOW_HOSTS": "127.0.0.1",  # the receiver's loopback
                      "GRPODECK_ALERT_RETRY_SECONDS": "1", "GRPODECK_LOST_CHECK_SECONDS": "2",
                      "GRPODECK_LOST_AFTER_SECONDS": "15",
                      "GRPODECK_ALERT_POLL_SECONDS": "0.2", "GRPODECK_ALERT_TIMEOUT_SECONDS": "300"})
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def stack_db(live: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test process reads the stack's database directly (and runs the lost check)."""
    for key, value in {**live.extra_env, "GRPODECK_DATABASE_URL": live.database_url,
                       "GRPODECK_PUBLIC_URL": live.url}.items():
        monkeypatch.setenv(key, value)  # the same settings as the stack's processes
    caches = (config_module.get_settings, db_module.get_engine, db_module.get_sessionmaker)
    for cached in caches:
        cached.cache_clear()
    yield
    db_module.get_engine().dispose()
    for cached in caches:
        cached.cache_clear()


def api_alerts(live: Stack, run_id: int) -> list[dict]:
    return httpx.get(f"{live.url}/api/alerts", params={"state": "all", "run_id": run_id},
                     timeout=10).json()


def messages_for(receiver: HttpReceiver, run_id: int, path: str = "/hook") -> list[dict]:
    return [a for b in receiver.bodies(path) for a in b["alerts"] if a["run_id"] == run_id]


def arrival_delay(receiver: HttpReceiver, live: Stack, alert: dict) -> float:
    """Seconds from the alert being stored (with its finding) to the receiver getting it."""
    got = next(r.at for r in receiver.received
               if any(a["id"] == alert["id"] for a in r.body.get("alerts", [])))
    opened = datetime.fromisoformat(alert["opened_at"])
    opened = opened if opened.tzinfo else opened.replace(tzinfo=UTC)
    return got - opened.timestamp()


def test_a_constant_reward_run_alerts_once_and_resolves_when_it_ends(
        live: Stack, receiver: HttpReceiver) -> None:
    run_id = live.launch(name="it-alert-constant", max_steps=30, **TINY,
                         rewards=[{"name": "constant", "params": {"value": 0.0}}])
    live.wait_until(lambda: any(a["run_id"] == run_id for a in messages_for(receiver, run_id)),
                    "the opening message", timeout=300)
    run = live.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    live.wait_until(lambda: any(a["event"] == "resolved" for a in messages_for(receiver, run_id)),
                    "the resolved message", timeout=60)
    time.sleep(3)  # a duplicate would arrive in this time
    found = api_alerts(live, run_id)
    stall = [a for a in found if a["category"] in ("zero_reward_spread", "stalled")]
    assert stall and len({a["category"] for a in stall}) == len(stall), found  # not per batch
    sent = [(a["id"], a["event"]) for a in messages_for(receiver, run_id)]
    for alert in stall:  # each confirmed live (opened), or only by the final evaluation
        first = alert["history"][0]["event"]
        assert first in ("opened", "found_at_end"), alert
        assert alert["state"] == "resolved"
        assert sent.count((alert["id"], first)) == 1  # delivered once
        if first == "opened":
            assert alert["resolved_reason"] == "run succeeded"
            assert sent.count((alert["id"], "resolved")) == 1
        else:  # one message, on an alert that is already resolved
            assert alert["resolved_reason"] == "found when the run succeeded"
        assert {d["status"] for d in alert["deliveries"]} == {"sent"}
    alert = stall[0]
    print(f"\nFIGURE finding stored -> receiver: {arrival_delay(receiver, live, alert):.2f} s "
          f"(scheduler polls every 0.2 s)")


def test_a_five_step_smoke_run_with_a_constant_reward_alerts_critical_while_running(
        live: Stack, receiver: HttpReceiver) -> None:
    """Issue 23: the place to catch a reward with no spread is a smoke run. A real worker trains
    5 steps with a constant reward; every group has zero spread on every row, an exact signal
    judged after 3 rows, so the critical alert is *opened* while the run is running (not only
    found at its end) and delivered, then resolved when the run ends."""
    run_id = live.launch(name="it-alert-smoke", max_steps=5, **{**TINY, "logging_steps": 1},
                         rewards=[{"name": "constant", "params": {"value": 0.0}}])
    run = live.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    live.wait_until(lambda: any(a["event"] == "resolved" for a in messages_for(receiver, run_id)),
                    "the resolved message", timeout=60)
    (alert,) = [a for a in api_alerts(live, run_id) if a["category"] == "zero_reward_spread"]
    assert alert["severity"] == "critical" and alert["history"][0]["event"] == "opened", alert
    assert alert["resolved_reason"] == "run succeeded"
    assert alert["history"][0]["step"] <= 5  # opened at a training step, before the end
    sent = [(a["event"], a["severity"]) for a in messages_for(receiver, run_id)
            if a["id"] == alert["id"]]
    assert sent == [("opened", "critical"), ("resolved", "critical")], sent


def _scripted_run(live: Stack, **spec: object) -> tuple[int, dict[str, str]]:
    from app.core.db import get_sessionmaker
    from app.runs import service
    from grpodeck.contract.spec import RunSpec

    with get_sessionmaker()() as db:
        run, ticket = service.create_run(db, spec=RunSpec.model_validate({**SPEC, **spec}))
        db.commit()
    reply = httpx.post(f"{live.url}/api/runs/{run.id}/claim", json={"pid": 1},
                       headers={"Authorization": f"Bearer {ticket}"}, timeout=10)
    assert reply.status_code == 200, reply.text
    return run.id, {"Authorization": f"Bearer {reply.json()['token']}"}


def test_a_receiver_that_never_answers_does_not_slow_ingest(
        live: Stack, receiver: HttpReceiver, stack_db: None) -> None:
    run_id, headers = _scripted_run(live, name="it-hung-receiver", alerts={
        "urls": [f"webhook+{receiver.url('/hung')}"]})
    rows = zero_spread(range(1, 401))
    before, during = [], []
    with httpx.Client(base_url=live.url, headers=headers, timeout=60) as client:
        for start in range(0, len(rows), 10):
            if receiver.hanging and len(during) >= 15:
                break
            started = time.monotonic()
            reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows[start:start + 10]})
            elapsed = time.monotonic() - started
            assert reply.status_code == 200, reply.text
            (during if receiver.hanging else before).append(elapsed)
            time.sleep(0.1)
    assert receiver.hanging >= 1, "the sender never reached the hung receiver"
    assert len(during) >= 15  # ingest kept answering while the sender was stuck
    assert messages_for(receiver, run_id, "/hook")  # the other destination was not held up
    assert max(during) < 10, during  # generous: only a blocked ingest would take that long
    print(f"\nFIGURE ingest latency: before the alert median {median(before) * 1000:.0f} ms "
          f"(max {max(before) * 1000:.0f}), while the receiver hangs median "
          f"{median(during) * 1000:.0f} ms (max {max(during) * 1000:.0f}), "
          f"{len(during)} batches")


def _descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_killing_the_worker_mid_run_fails_the_run_with_a_critical_alert(
        live: Stack, receiver: HttpReceiver, stack_db: None) -> None:
    run_id = live.launch(name="it-alert-killed", max_steps=10_000, **TINY,
                         rewards=[{"name": "length_target"}])
    live.wait_until(lambda: live.run(run_id)["step"] >= 2, "two steps trained")
    worker = live.named["worker"]
    victims = [worker.pid, *_descendants(worker.pid)]  # celery, its pool, the trainer
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    worker.wait(timeout=30)
    assert live.run(run_id)["status"] == "running"  # nobody told the web app
    # the scheduler's own check, on the real clock: silence past GRPODECK_LOST_AFTER_SECONDS
    live.wait_until(lambda: live.run(run_id)["status"] == "failed", "the run failed as lost",
                    timeout=120)
    assert "worker lost" in live.run(run_id)["error"]
    live.wait_until(lambda: any(a["category"] == "lost" for a in messages_for(receiver, run_id)),
                    "the lost alert delivered", timeout=60)
    lost = [a for a in api_alerts(live, run_id) if a["category"] == "lost"]
    assert [(a["severity"], a["state"]) for a in lost] == [("critical", "open")]
    message = next(a for a in messages_for(receiver, run_id) if a["category"] == "lost")
    assert message["severity"] == "critical" and message["run_name"] == "it-alert-killed"
