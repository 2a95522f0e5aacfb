"""Diagnostics inside the app: findings stored as metrics arrive, open, resolve and reopen with
the data; the guard rail; lost runs; and logs imported from elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from app.ingest.watch import check_live_runs
from tests.app.conftest import html, one, running_run
from tests.conftest import trainer_state

ZERO_SPREAD = {"reward": 0.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "loss": 0.0}
HEALTHY = {"reward": lambda s: 0.2 + s / 1000, "reward_std": 0.3, "frac_reward_zero_std": 0.2,
           "loss": 0.0}


def rows(steps: range, **series) -> list[dict]:  # type: ignore[no-untyped-def]
    return [{"step": s, "metrics": {k: (f(s) if callable(f) else f) for k, f in series.items()}}
            for s in steps]


def post(client: TestClient, run_id: int, headers: dict, batch: list[dict]) -> dict:
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": batch}, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json()


def findings(client: TestClient, run_id: int, **params) -> dict:  # type: ignore[no-untyped-def]
    reply = client.get(f"/api/runs/{run_id}/findings", params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()


def finding_on_page(client: TestClient, run_id: int, category: str) -> Tag:
    return one(client.get(f"/runs/{run_id}").text, f'details.finding[data-category="{category}"]')


def verdict_on_page(client: TestClient, run_id: int) -> str:
    return one(client.get(f"/runs/{run_id}").text, "#run-verdict").get_text(strip=True)


def verdict_in_list(client: TestClient, run_id: int) -> str:
    row = one(client.get("/runs").text, f'#runs-table tr:has(a[href="/runs/{run_id}"])')
    return row.select_one(".verdict").get_text(strip=True)


def test_zero_spread_run_is_flagged_as_batches_arrive(client: TestClient) -> None:
    run_id, headers = running_run(client)
    batch = rows(range(1, 61), **ZERO_SPREAD, **{"rewards/length_target/mean": 0.0})
    for start in range(0, 60, 10):  # the way a worker sends them: small batches
        post(client, run_id, headers, batch[start:start + 10])
    body = findings(client, run_id)
    finding = next(f for f in body["findings"] if f["category"] == "zero_reward_spread")
    assert finding["severity"] == "critical" and finding["first_step"] == 1
    assert finding["last_step"] == 60 and finding["evidence"]["kind"] == "too_hard"
    assert finding["actions"] and "zero reward spread" in finding["summary"]
    assert body["verdict"] == "critical"
    element = finding_on_page(client, run_id, "zero_reward_spread")
    # one line until opened (the charts stay in the first screen): templates/runs/_findings.html
    assert "resolved" not in element["class"] and not element.has_attr("open")
    assert finding["summary"] in element.select_one(".summary").get_text()
    assert verdict_on_page(client, run_id) == "critical"
    assert verdict_in_list(client, run_id) == "critical"


@pytest.mark.one_backend
def test_healthy_run_stays_healthy(client: TestClient) -> None:
    run_id, headers = running_run(client)
    batch = rows(range(1, 81), **HEALTHY, entropy=lambda s: 1.0 - s / 1000)
    for start in range(0, 80, 10):  # the way a worker sends them: small batches
        post(client, run_id, headers, batch[start:start + 10])
    body = findings(client, run_id, include_resolved=True)
    coverage = {k: body.pop(k) for k in ("metrics", "unchecked", "reason", "not_applicable")}
    assert (body.pop("read_as"), body.pop("vocabulary")) == ({}, None)  # TRL names: no renames
    assert body == {"run_id": run_id, "verdict": "healthy", "verdict_text": "healthy",
                    "findings": []}
    assert coverage["not_applicable"] == {"divergence": "no eval split"}  # the spec has none
    assert "reward" in coverage["metrics"] and coverage["reason"] is None
    page = html(client.get(f"/runs/{run_id}").text)
    assert page.select("details.finding") == []
    assert page.select_one("#run-verdict").get_text(strip=True) == "healthy"
    assert "No problems found so far." in page.select_one("#findings-panel").get_text()


def test_a_finding_opens_resolves_and_reopens(client: TestClient) -> None:
    run_id, headers = running_run(client)

    def zero_spread() -> dict | None:
        everything = findings(client, run_id, include_resolved=True)["findings"]
        matches = [f for f in everything if f["category"] == "zero_reward_spread"]
        assert len(matches) <= 1  # one record per (category, metric), reused when it reopens
        return matches[0] if matches else None

    def send(steps: range, **series) -> None:  # type: ignore[no-untyped-def]
        batch = rows(steps, **series)
        for start in range(0, len(batch), 5):  # the way a worker sends them: small batches
            post(client, run_id, headers, batch[start:start + 5])

    send(range(1, 41), **ZERO_SPREAD)
    opened = zero_spread()
    assert opened and opened["active"] and opened["severity"] == "critical"
    assert findings(client, run_id)["verdict"] == "critical"
    element = finding_on_page(client, run_id, "zero_reward_spread")
    # one line until opened (the charts stay in the first screen): templates/runs/_findings.html
    assert "resolved" not in element["class"] and not element.has_attr("open")
    assert verdict_on_page(client, run_id) == "critical"

    send(range(41, 46), **HEALTHY)  # the groups spread again: one batch is not enough...
    held = zero_spread()
    assert held and held["active"] and findings(client, run_id)["verdict"] == "critical"
    send(range(46, 121), **HEALTHY)  # ...but held long enough, it resolves
    resolved = zero_spread()
    assert resolved and resolved["active"] is False
    active = findings(client, run_id)
    assert "zero_reward_spread" not in {f["category"] for f in active["findings"]}
    assert active["verdict"] != "critical"
    element = finding_on_page(client, run_id, "zero_reward_spread")
    assert "resolved" in element["class"] and not element.has_attr("open")
    assert "resolved" in element.select_one("summary .muted").get_text()
    assert verdict_on_page(client, run_id) == active["verdict"]

    send(range(121, 201), **ZERO_SPREAD)  # and collapse again (held long enough to confirm)
    reopened = zero_spread()
    assert reopened and reopened["active"] and reopened["first_step"] > 120  # a new episode
    assert reopened["last_step"] == 200 and findings(client, run_id)["verdict"] == "critical"
    element = finding_on_page(client, run_id, "zero_reward_spread")
    # one line until opened (the charts stay in the first screen): templates/runs/_findings.html
    assert "resolved" not in element["class"] and not element.has_attr("open")
    assert "resolved" not in element.select_one("summary .muted").get_text()
    assert verdict_on_page(client, run_id) == "critical"
    assert verdict_in_list(client, run_id) == "critical"


def test_nan_grad_norm_alone_trips_the_guard_rail(client: TestClient) -> None:
    run_id, headers = running_run(client, stop_on_critical=True)
    healthy = post(client, run_id, headers, rows(range(1, 6), reward=0.5, loss=0.01,
                                                 grad_norm=1.0))
    assert healthy["stop"] is False
    replies = [post(client, run_id, headers, rows(steps, reward=0.5, loss=0.01, grad_norm="nan"))
               for steps in (range(6, 8), range(8, 10), range(10, 13))]
    assert [r["stop"] for r in replies] == [False, False, True]  # only a confirmed critical
    reply = replies[-1]
    assert reply["reason"].startswith("stopped by diagnostics: grad_norm is nan")
    critical = [f for f in findings(client, run_id)["findings"] if f["severity"] == "critical"]
    assert [(f["category"], f["metric"]) for f in critical] == [
        ("numerical_instability", "grad_norm")]
    done = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    run = client.get(f"/api/runs/{run_id}").json()
    assert done.json()["status"] == run["status"] == "cancelled"
    # the status panel the page polls (the whole page draws charts: NaN there is another test's)
    status = one(client.get(f"/runs/{run_id}/_status").text, "#status-panel")
    assert status.select_one("#run-status").get_text(strip=True) == "cancelled"
    assert "stopped by diagnostics: grad_norm is nan" in status.get_text()


@pytest.mark.one_backend
def test_a_warning_does_not_trip_the_guard_rail(client: TestClient) -> None:
    run_id, headers = running_run(client, stop_on_critical=True)
    replies = [post(client, run_id, headers, rows(steps, reward="nan", loss=0.01, grad_norm=1.0))
               for steps in (range(1, 4), range(4, 7), range(7, 10), range(10, 13))]
    # a non-finite reward is a warning, not a broken optimiser: no stop even once confirmed
    assert not any(r["stop"] or r["reason"] for r in replies)
    body = findings(client, run_id)
    assert body["verdict"] == "warning"
    assert [(f["category"], f["metric"]) for f in body["findings"]] == [
        ("numerical_instability", "reward")]


@pytest.mark.one_backend
def test_critical_finding_without_guard_rail_does_not_stop(client: TestClient) -> None:
    run_id, headers = running_run(client)
    replies = [post(client, run_id, headers, rows(steps, reward=0.5, loss="nan"))
               for steps in (range(1, 4), range(4, 7), range(7, 10))]
    assert not any(r["stop"] or r["reason"] for r in replies)
    assert findings(client, run_id)["verdict"] == "critical"
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"


def test_silent_live_run_is_flagged_lost_then_failed(client: TestClient) -> None:
    run_id, headers = running_run(client)
    post(client, run_id, headers, rows(range(1, 11), reward=0.5, loss=0.0))
    assert check_live_runs(datetime.now(UTC) + timedelta(minutes=1)) == 0
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"
    assert check_live_runs(datetime.now(UTC) + timedelta(hours=6)) == 1
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "failed" and run["error"].startswith("lost:")


SATURATED = trainer_state(range(1, 31), loss=0.0, reward=0.9, reward_std=0.0,
                          frac_reward_zero_std=0.95, completion_length=40.0,
                          **{"rewards/acc": 0.9})


def test_upload_form_imports_a_trainer_state(client: TestClient) -> None:
    page = client.post("/runs/import", data={"name": "saturated"}, follow_redirects=False,
                       files={"log": ("trainer_state.json", json.dumps(SATURATED))})
    assert page.status_code == 303
    run_id = int(page.headers["location"].rsplit("/", 1)[1])
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "imported" and run["name"] == "saturated" and run["step"] == 30
    series = client.get(f"/api/runs/{run_id}/metrics").json()
    assert series["completions/mean_length"]["values"] == [40.0] * 30  # canonical names
    assert series["rewards/acc/mean"]["steps"] == list(range(1, 31))
    zero = [f for f in findings(client, run_id)["findings"] if f["category"] == "zero_reward_spread"]
    assert zero and zero[0]["evidence"].get("kind") == "too_easy"
    assert "resolved" not in finding_on_page(client, run_id, "zero_reward_spread")["class"]


@pytest.mark.one_backend
def test_upload_of_garbage_explains_and_stores_nothing(client: TestClient) -> None:
    page = client.post("/runs/import", files={"log": ("x.json", "{\"hello\": 1}")})
    assert page.status_code == 422
    assert "has no 'step'" in one(page.text, "#import-error").get_text()
    assert client.get("/api/runs").json() == []


def test_cli_diagnose_prints_json_without_a_server(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps({"step": s, "reward": 0.5, "loss": "nan"})
                              for s in range(1, 6)))
    out = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(path), "--json"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    body = json.loads(out)
    assert body["verdict"] == "critical"
    assert body["findings"][0]["category"] == "numerical_instability"
    assert {"category", "severity", "first_step", "last_step", "summary"} <= set(body["findings"][0])
    bad = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(tmp_path / "nope")],
                         capture_output=True, text=True, check=False, timeout=120)
    assert bad.returncode == 2 and "error" in bad.stderr
