"""Smoke tests (a few steps, a plain answer, one button to the full run) and the dry-run API's
contract: a spec in and an id out, the worker's single-use result, the result's names."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.dryruns.models import DryRun
from app.runs.models import Run
from app.runs.service import hash_token
from tests.app.conftest import SPEC, claim, one, queued_run
from tests.conftest import tiny_spec

FORM = {"name": "smoky", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "reward_0_name": "length_target", "reward_0_weight": "1", "reward_0_params": "target=20",
        "num_generations": "4", "max_steps": "30", "smoke_steps": "3", "seed": "5"}


def smoke_run(client: TestClient, reward_std: float) -> tuple[int, dict[str, str]]:
    """A claimed smoke run (3 of 30 steps) that reported three steps."""
    run_id, ticket = queued_run(tiny_spec(name="smoky", max_steps=3))
    with get_sessionmaker()() as db:
        db.get(Run, run_id).smoke_full_steps = 30
        db.commit()
    headers = claim(client, run_id, ticket)
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "reward_std": reward_std, "loss": 0.0}}
            for s in (1, 2, 3)]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    return run_id, headers


def test_smoke_test_from_the_form_runs_a_few_steps_of_the_same_spec(client: TestClient) -> None:
    reply = client.post("/runs/smoke", data=FORM, follow_redirects=False)
    assert reply.status_code == 303, reply.text
    run = client.get(f"/api/runs/{reply.headers['location'].rsplit('/', 1)[1]}").json()
    assert run["max_steps"] == 3 and run["spec"]["seed"] == 5
    bad = client.post("/runs/smoke", data={**FORM, "smoke_steps": "500"})
    assert bad.status_code == 422 and "between 1 and 50" in bad.text


def test_smoke_test_says_rewards_vary_and_launches_the_full_run(client: TestClient) -> None:
    run_id, headers = smoke_run(client, reward_std=0.2)
    waiting = one(client.get(f"/runs/{run_id}").text, "#smoke-verdict")
    assert waiting["data-verdict"] == "ok"  # both answers are already yes
    client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    panel = one(client.get(f"/runs/{run_id}").text, "#smoke-panel")
    assert panel.select_one("#smoke-vary").get_text(strip=True).endswith("yes")
    assert "reward" in panel.select_one("#smoke-move").get_text()
    full = client.post(panel.form["action"], follow_redirects=False)
    assert full.status_code == 303
    full_id = int(full.headers["location"].rsplit("/", 1)[1])
    smoke_spec = client.get(f"/api/runs/{run_id}").json()["spec"]
    full_run = client.get(f"/api/runs/{full_id}").json()
    assert full_run["max_steps"] == 30 and full_run["status"] == "queued"
    assert full_run["spec"] == {**smoke_spec, "max_steps": 30}  # unchanged but for the steps
    assert f"/runs/{run_id}" in one(client.get(f"/runs/{full_id}").text, "#parent-link")["href"]


def test_smoke_test_without_reward_spread_says_so(client: TestClient) -> None:
    run_id, headers = smoke_run(client, reward_std=0.0)
    assert one(client.get(f"/runs/{run_id}").text, "#smoke-verdict")["data-verdict"] == "waiting"
    client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    verdict = one(client.get(f"/runs/{run_id}").text, "#smoke-verdict")
    assert verdict["data-verdict"] == "no_variation" and "would not learn" in verdict.get_text()
    plain, _ = queued_run()
    assert client.post(f"/runs/{plain}/launch-full").status_code == 409


def stored_dry_run(ticket: str) -> int:
    with get_sessionmaker()() as db:
        dry = DryRun(spec=tiny_spec(), status="queued", ticket_hash=hash_token(ticket))
        db.add(dry)
        db.commit()
        return dry.id


def test_dry_run_api_queues_and_takes_one_result(client: TestClient) -> None:
    queued = client.post("/api/dry-runs", json=SPEC)
    assert queued.status_code == 202 and queued.json()["status"] == "queued"
    assert client.get(queued.json()["url"]).status_code == 200  # the page polls meanwhile
    assert client.post("/api/dry-runs", json={**SPEC, "num_generations": 1}).status_code == 422
    assert client.post("/api/dry-runs?prompts=99", json=SPEC).status_code == 422

    dry_id = stored_dry_run("t1")
    groups = [{"prompt": "p", "completions": [{"text": "<b>x</b>", "rewards": {"r": v}}
                                              for v in (0, 1, 1, 0)]}]
    body = {"weights": {"r": 1.0}, "groups": groups, "timings": {"total": 1.5},
            "reference": {"column": "answer", "count": 2, "rewards": {"r": [1.0, 0.5]}}}
    url = f"/api/dry-runs/{dry_id}/result"
    assert client.post(url, json=body, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.post(url, json={"groups": "x"},
                       headers={"Authorization": "Bearer t1"}).status_code == 422
    assert client.post(url, json=body, headers={"Authorization": "Bearer t1"}).status_code == 204
    again = client.post(url, json=body, headers={"Authorization": "Bearer t1"})
    assert again.status_code == 401 and "already in" in again.json()["detail"]
    result = client.get(f"/api/dry-runs/{dry_id}").json()
    assert result["status"] == "done" and result["zero_spread_share"] == 0.0
    assert result["verdict"] == "ok" and result["rewards"]["r"]["mean"] == 0.5
    page = client.get(f"/dry-runs/{dry_id}").text
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page  # model output is text
    assert one(page, '#group-size-advice tr[data-g="4"]').get_text().count("%") == 3
    assert "r mean 0.75" in " ".join(one(page, "#dry-run-reference").get_text().split())
    assert client.get("/api/dry-runs/424242").status_code == 404
    edit = one(client.get(f"/runs/new?dry_run={dry_id}").text, "#run-form")  # "Edit the spec"
    assert edit.select_one("#f-max_completion_length")["value"] == "16"
    assert edit.select_one('input[name="reward_0_params"]')["value"] == "target=20"
