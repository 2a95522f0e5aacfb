"""Runs that report like a worker, through the real report API."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from app.alerts.sender import Sender
from app.core.db import get_sessionmaker
from app.runs import service
from grpodeck.contract.spec import RunSpec

SPEC = {"name": "alert-run", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "rewards": [{"name": "length_target", "weight": 1.0, "params": {"target": 20}}],
        "num_generations": 4, "max_steps": 200}


def start_run(client: TestClient, **spec: Any) -> tuple[int, dict[str, str]]:
    """A run claimed as a worker claims it: (id, the run token's headers)."""
    with get_sessionmaker()() as db:
        run, ticket = service.create_run(db, spec=RunSpec.model_validate({**SPEC, **spec}))
        db.commit()
    reply = client.post(f"/api/runs/{run.id}/claim", json={"pid": 1},
                        headers={"Authorization": f"Bearer {ticket}"})
    assert reply.status_code == 200, reply.text
    return run.id, {"Authorization": f"Bearer {reply.json()['token']}"}


def zero_spread(steps: range, frac: float = 1.0) -> list[dict[str, Any]]:
    """What TRL logs when every completion gets the same reward (``frac`` < 0.95: most groups,
    a finding the diagnostics judge over a window and confirm, not an exact signal shown at
    once)."""
    return [{"step": s, "metrics": {"reward": 0.0, "reward_std": 0.0 if frac == 1.0 else 0.1,
                                    "frac_reward_zero_std": frac, "loss": 0.0,
                                    "rewards/length_target/mean": 0.0}}
            for s in steps]


def healthy(steps: range) -> list[dict[str, Any]]:
    return [{"step": s, "metrics": {"reward": 0.2 + s / 400, "reward_std": 0.3 + 0.01 * (s % 7),
                                    "frac_reward_zero_std": 0.0, "loss": 0.01,
                                    "rewards/length_target/mean": 0.2 + s / 400}}
            for s in steps]


def report(client: TestClient, run_id: int, headers: dict[str, str],
           rows: list[dict[str, Any]], batch: int = 10) -> None:
    for start in range(0, len(rows), batch):
        reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows[start:start + batch]},
                            headers=headers)
        assert reply.status_code == 200, reply.text


def finish(client: TestClient, run_id: int, headers: dict[str, str], returncode: int = 0) -> None:
    reply = client.post(f"/api/runs/{run_id}/finished", json={"returncode": returncode},
                        headers=headers)
    assert reply.status_code == 200, reply.text


def alerts(client: TestClient, state: str = "all", **params: Any) -> list[dict[str, Any]]:
    reply = client.get("/api/alerts", params={"state": state, **params})
    assert reply.status_code == 200, reply.text
    return reply.json()


def send_until(sender: Sender, done: Any, timeout: float = 30) -> None:
    """Drive an in-process sender until ``done()`` (the sending itself is real)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sender.cycle()
        if done():
            return
        time.sleep(0.05)
    raise AssertionError("sender did not get there in time")
