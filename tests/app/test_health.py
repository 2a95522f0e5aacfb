"""Diagnostics inside the app: findings stored as metrics arrive, the guard rail, lost runs,
and logs imported from elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.health.watch import check_live_runs
from app.runs import service
from app.runs.spec import RunSpec
from tests.app.conftest import SPEC, running_run


def rows(steps: range, **series) -> list[dict]:  # type: ignore[no-untyped-def]
    return [{"step": s, "metrics": {k: (f(s) if callable(f) else f) for k, f in series.items()}}
            for s in steps]


def post(client: TestClient, run_id: int, headers: dict, batch: list[dict]) -> dict:
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": batch}, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_zero_spread_run_is_flagged_as_batches_arrive(client: TestClient) -> None:
    run_id, headers = running_run(client)
    batch = rows(range(1, 61), reward=0.0, reward_std=0.0, frac_reward_zero_std=1.0, loss=0.0,
                 **{"rewards/length_target/mean": 0.0})
    for start in range(0, 60, 10):  # the way a worker sends them: small batches
        post(client, run_id, headers, batch[start:start + 10])
    body = client.get(f"/api/runs/{run_id}/findings").json()
    categories = {f["category"] for f in body["findings"]}
    assert "zero_reward_spread" in categories
    assert body["verdict"] in ("warning", "critical")
    finding = next(f for f in body["findings"] if f["category"] == "zero_reward_spread")
    assert finding["evidence"] and finding["actions"] and finding["summary"]
    page = client.get(f"/runs/{run_id}").text
    assert 'data-category="zero_reward_spread"' in page and "verdict-" in page
    assert "verdict-" in client.get("/runs").text


def test_healthy_run_stays_healthy_and_findings_can_resolve(client: TestClient) -> None:
    run_id, headers = running_run(client)
    post(client, run_id, headers, rows(range(1, 81), reward=lambda s: 0.2 + s / 100,
                                       reward_std=0.3, frac_reward_zero_std=0.2, loss=0.0,
                                       entropy=lambda s: 1.0 - s / 1000))
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "healthy"


def test_stop_on_critical_asks_the_worker_to_stop(client: TestClient) -> None:
    with get_sessionmaker()() as db:
        run, token = service.create_run(db, spec=RunSpec.model_validate(
            {**SPEC, "stop_on_critical": True}))
        db.commit()
    headers = {"Authorization": f"Bearer {token}"}
    client.post(f"/api/runs/{run.id}/started", json={}, headers=headers)
    healthy = post(client, run.id, headers, rows(range(1, 6), reward=0.5, loss=0.01, grad_norm=1.0))
    assert healthy["stop"] is False
    replies = [post(client, run.id, headers, rows(steps, reward=0.5, loss="nan", grad_norm="nan"))
               for steps in (range(6, 8), range(8, 10), range(10, 13))]
    assert [r["stop"] for r in replies] == [False, False, True]  # only a confirmed critical
    assert replies[-1]["reason"].startswith("stopped by diagnostics")
    client.post(f"/api/runs/{run.id}/finished", json={"returncode": 0}, headers=headers)
    assert client.get(f"/api/runs/{run.id}").json()["status"] == "cancelled"


def test_critical_finding_without_guard_rail_does_not_stop(client: TestClient) -> None:
    run_id, headers = running_run(client)
    replies = [post(client, run_id, headers, rows(steps, reward=0.5, loss="nan"))
               for steps in (range(1, 4), range(4, 7), range(7, 10))]
    assert not any(r["stop"] for r in replies)
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "critical"


def test_silent_live_run_is_flagged_lost_then_failed(client: TestClient) -> None:
    run_id, headers = running_run(client)
    post(client, run_id, headers, rows(range(1, 11), reward=0.5, loss=0.0))
    assert check_live_runs(datetime.now(UTC) + timedelta(minutes=1)) == 0
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"
    assert check_live_runs(datetime.now(UTC) + timedelta(hours=6)) == 1
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "failed" and run["error"].startswith("lost:")


TRAINER_STATE = {"global_step": 30, "max_steps": 30, "log_history": [
    {"step": s, "loss": 0.0, "reward": 0.9, "reward_std": 0.0, "frac_reward_zero_std": 0.95,
     "completion_length": 40.0, "rewards/acc": 0.9} for s in range(1, 31)]}


def test_upload_form_imports_a_trainer_state(client: TestClient, tmp_path) -> None:  # type: ignore[no-untyped-def]
    page = client.post("/runs/import", data={"name": "saturated"}, follow_redirects=False,
                       files={"log": ("trainer_state.json", json.dumps(TRAINER_STATE))})
    assert page.status_code == 303
    run_id = int(page.headers["location"].rsplit("/", 1)[1])
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "imported" and run["name"] == "saturated" and run["step"] == 30
    series = client.get(f"/api/runs/{run_id}/metrics").json()
    assert "completions/mean_length" in series and "rewards/acc/mean" in series  # canonical
    findings = client.get(f"/api/runs/{run_id}/findings").json()["findings"]
    zero = [f for f in findings if f["category"] == "zero_reward_spread"]
    assert zero and zero[0]["evidence"].get("kind") == "too_easy"


def test_upload_of_garbage_explains_and_stores_nothing(client: TestClient) -> None:
    page = client.post("/runs/import", files={"log": ("x.json", "{\"hello\": 1}")})
    assert page.status_code == 422 and 'id="import-error"' in page.text
    assert client.get("/api/runs").json() == []


def test_cli_diagnose_prints_json_without_a_server(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(json.dumps({"step": s, "reward": 0.5, "loss": "nan"})
                              for s in range(1, 6)))
    out = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(path), "--json"],
                         capture_output=True, text=True, check=True).stdout
    body = json.loads(out)
    assert body["verdict"] == "critical"
    assert body["findings"][0]["category"] == "numerical_instability"
    assert {"category", "severity", "first_step", "last_step", "summary"} <= set(body["findings"][0])
    bad = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(tmp_path / "nope")],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "error" in bad.stderr
