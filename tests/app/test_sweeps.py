"""Sweeps: POST /api/sweeps launches one run per group size under one sweep id (all or
nothing), and /sweeps/{id} overlays reward, its spread and the zero-spread share per run."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs import service
from app.runs.models import Run
from grpodeck.contract.presets import PRESETS
from tests.app.conftest import claim, html, one
from tests.conftest import tiny_spec


def sweep(client: TestClient, values: list[int], **spec: object) -> dict:  # type: ignore[type-arg]
    reply = client.post("/api/sweeps", json={"spec": tiny_spec(name="sw", **spec),
                                             "num_generations": values})
    assert reply.status_code == 201, reply.text
    return reply.json()


def test_sweep_launches_one_run_per_group_size(client: TestClient) -> None:
    body = sweep(client, [2, 8, 16], per_device_train_batch_size=4)
    assert [r["num_generations"] for r in body["runs"]] == [2, 8, 16]
    with get_sessionmaker()() as db:
        runs = [db.get(Run, r["id"]) for r in body["runs"]]
        assert {r.sweep_id for r in runs} == {body["sweep_id"]}
        assert [r.spec["num_generations"] for r in runs] == [2, 8, 16]
        assert [r.spec["per_device_train_batch_size"] for r in runs] == [None] * 3
        assert [r.name for r in runs] == ["sw G=2", "sw G=8", "sw G=16"]
    kept = sweep(client, [2, 8, 16], per_device_train_batch_size=16)  # whole groups of each
    with get_sessionmaker()() as db:
        assert [db.get(Run, r["id"]).spec["per_device_train_batch_size"]
                for r in kept["runs"]] == [16] * 3


def test_the_sweep_preset_sweeps(client: TestClient) -> None:
    preset = PRESETS["group-size-sweep"]
    reply = client.post("/api/sweeps", json={"spec": preset.spec, **preset.sweep})
    assert reply.status_code == 201, reply.text
    assert [r["num_generations"] for r in reply.json()["runs"]] == [2, 8, 16]


def test_a_sweep_that_cannot_run_launches_nothing(client: TestClient) -> None:
    before = len(client.get("/api/runs").json())
    bad = client.post("/api/sweeps", json={"spec": tiny_spec(), "num_generations": [2, 65]})
    assert bad.status_code == 422 and "num_generations" in bad.text
    twice = client.post("/api/sweeps", json={"spec": tiny_spec(), "num_generations": [4, 4]})
    assert twice.status_code == 422 and "each value once" in twice.text
    alone = client.post("/api/sweeps", json={"spec": tiny_spec(), "num_generations": [4]})
    assert alone.status_code == 422
    assert len(client.get("/api/runs").json()) == before


def report(client: TestClient, run_id: int, spread: float) -> None:
    """Claim a sweep run as a worker would (a fresh ticket: the real one travels in the queue)
    and report three steps."""
    with get_sessionmaker()() as db:
        ticket = "t" * 40
        db.get(Run, run_id).claim_hash = service.hash_token(ticket)
        db.commit()
    headers = claim(client, run_id, ticket)
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "reward_std": spread,
                                    "frac_reward_zero_std": 1 - spread, "kl": 0.01}}
            for s in (1, 2, 3)]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200


def test_sweep_page_overlays_the_runs(client: TestClient) -> None:
    body = sweep(client, [2, 8])
    for r, spread in zip(body["runs"], (0.2, 0.6), strict=True):
        report(client, r["id"], spread)
    page = client.get(body["url"])
    assert page.status_code == 200
    rows = html(page.text).select("#sweep-runs tbody tr")
    assert [r.select("td")[1].get_text() for r in rows] == ["2", "8"]
    charts = html(page.text).select("#sweep-charts .chart")
    assert [c["data-metric"] for c in charts] == ["reward", "reward_std", "frac_reward_zero_std"]
    spread = json.loads(charts[1]["data-figure"])
    assert [t["meta"] for t in spread["data"]] == [r["id"] for r in body["runs"]]
    assert [t["y"] for t in spread["data"]] == [[0.2] * 3, [0.6] * 3]
    assert one(page.text, "h1").get_text().endswith(body["sweep_id"])


def test_unknown_sweep_is_a_404(client: TestClient) -> None:
    assert client.get("/sweeps/nope").status_code == 404
