"""JSON API and report API in-process, against real SQLite and PostgreSQL databases."""

from __future__ import annotations

import math

from fastapi.testclient import TestClient

from tests.app.conftest import SPEC, one, running_run


def test_launch_validates_and_queues(client: TestClient) -> None:
    response = client.post("/api/runs", json=SPEC)
    assert response.status_code == 201, response.text
    run = client.get(f"/api/runs/{response.json()['id']}").json()
    assert run["status"] == "queued" and run["max_steps"] == 5
    assert run["spec"]["rewards"][0]["params"] == {"target": 20}
    assert [r["id"] for r in client.get("/api/runs").json()] == [run["id"]]


def test_launch_rejects_with_per_field_errors_and_stores_nothing(client: TestClient) -> None:
    response = client.post("/api/runs", json={**SPEC, "num_generations": 1, "learning_rate": -1})
    assert response.status_code == 422
    fields = {e["loc"][-1] for e in response.json()["detail"]}
    assert {"num_generations", "learning_rate"} <= fields
    assert client.get("/api/runs").json() == []


def test_report_api_needs_the_runs_token(client: TestClient) -> None:
    run_id, headers = running_run(client)
    body = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}
    assert client.post(f"/api/runs/{run_id}/metrics", json=body).status_code == 401
    bad = {"Authorization": "Bearer nope"}
    assert client.post(f"/api/runs/{run_id}/metrics", json=body, headers=bad).status_code == 401
    assert client.post("/api/runs/999/metrics", json=body, headers=headers).status_code == 404


def test_ingest_is_idempotent_and_keeps_non_finite_values(client: TestClient) -> None:
    run_id, headers = running_run(client)
    rows = [{"step": s, "metrics": {"reward": s / 10, "loss": 0.0, "note": "text"}} for s in (1, 2)]
    rows.append({"step": 3, "metrics": {"reward": 0.3, "grad_norm": "nan", "kl": "inf"}})
    for _ in range(2):  # a retried batch must not duplicate points
        reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
        assert reply.status_code == 200 and reply.json()["stop"] is False
    series = client.get(f"/api/runs/{run_id}/metrics").json()
    assert series["reward"] == {"steps": [1, 2, 3], "values": [0.1, 0.2, 0.3]}
    assert series["grad_norm"]["values"] == ["nan"] and series["kl"]["values"] == ["inf"]
    assert "note" not in series
    only = client.get(f"/api/runs/{run_id}/metrics", params={"names": "loss"}).json()
    assert list(only) == ["loss"]
    assert client.get(f"/api/runs/{run_id}").json()["step"] == 3


def test_cancel_reaches_the_worker_through_the_ingest_reply(client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert client.post(f"/api/runs/{run_id}/cancel").json()["cancel_requested"] is True
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": []}, headers=headers).json()
    assert reply["stop"] is True and reply["reason"] == "cancelled by user"
    done = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert done.json()["status"] == "cancelled"
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 409


def test_failed_run_keeps_its_error(client: TestClient) -> None:
    run_id, headers = running_run(client)
    client.post(f"/api/runs/{run_id}/finished", headers=headers,
                json={"returncode": 1, "error": "RuntimeError: boom", "traceback_tail": "tb"})
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "failed" and run["error"] == "RuntimeError: boom"
    again = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert again.status_code == 401  # the token died with the run: a late duplicate changes nothing
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "failed"


def test_metrics_downsampling_keeps_extremes(client: TestClient) -> None:
    run_id, headers = running_run(client)
    rows = [{"step": s, "metrics": {"reward": math.sin(s / 50) + (5 if s == 777 else 0)}}
            for s in range(1, 3001)]
    client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
    series = client.get(f"/api/runs/{run_id}/metrics", params={"max_points": 200}).json()["reward"]
    assert len(series["steps"]) <= 200 and 777 in series["steps"]
    assert series["steps"][0] == 1 and series["steps"][-1] == 3000


def test_form_rejects_bad_values_and_marks_the_fields(client: TestClient) -> None:
    form = {"name": "f", "model": "unknown-model!", "dataset": "builtin:short-prompts",
            "reward_0_name": "length_target", "reward_0_weight": "1", "reward_0_params": "target=20",
            "num_generations": "1", "max_steps": "0", "learning_rate": "-1"}
    page = client.post("/runs/new", data=form)
    assert page.status_code == 422
    for field in ("model", "num_generations", "max_steps", "learning_rate"):
        assert f'id="e-{field}"' in page.text
    assert 'value="unknown-model!"' in page.text  # what the person typed is kept
    assert client.get("/api/runs").json() == []


def test_form_launches_and_redirects_to_the_run_page(client: TestClient) -> None:
    form = {"name": "from-form", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
            "reward_0_name": "length_target", "reward_0_weight": "1", "reward_0_params": "target=20",
            "num_generations": "4", "max_steps": "3"}
    page = client.post("/runs/new", data=form, follow_redirects=False)
    assert page.status_code == 303
    run_id = int(page.headers["location"].rsplit("/", 1)[1])
    run_page = client.get(page.headers["location"])
    assert run_page.status_code == 200
    assert one(run_page.text, ".run-head h1").get_text(" ", strip=True).startswith(
        f"from-form #{run_id}")
    assert one(run_page.text, "#run-status").get_text(strip=True) == "queued"
    row = one(client.get("/runs").text, f'#runs-table tr:has(a[href="/runs/{run_id}"])')
    assert row.select_one(".status").get_text(strip=True) == "queued"


def test_live_chart_poll_rebuilds_only_when_the_charts_shape_changes(client: TestClient) -> None:
    run_id, headers = running_run(client)

    def report(step: int, **metrics: float) -> None:
        client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                    json={"rows": [{"step": step, "metrics": metrics}]})

    report(1, reward=0.1)
    page = client.get(f"/runs/{run_id}").text
    poll = str(one(page, "#charts-panel")["data-poll"])
    assert 'data-after="1"' in page
    report(2, reward=0.2)  # new points only: the page appends them itself
    assert client.get(poll).status_code == 204
    report(3, reward=0.3, entropy=1.0)  # a new metric: a new chart, so rebuild
    fresh = client.get(poll)
    assert fresh.status_code == 200 and 'id="chart-entropy"' in fresh.text
    assert 'data-after="3"' in fresh.text


def test_metrics_after_a_step_returns_only_newer_points(client: TestClient) -> None:
    run_id, headers = running_run(client)
    client.post(f"/api/runs/{run_id}/metrics", headers=headers, json={"rows": [
        {"step": s, "metrics": {"reward": s, "loss": 0.0}} for s in range(1, 6)]})
    body = client.get(f"/api/runs/{run_id}/metrics", params={"after": 3, "names": "reward"}).json()
    assert body == {"reward": {"steps": [4, 5], "values": [4.0, 5.0]}}
