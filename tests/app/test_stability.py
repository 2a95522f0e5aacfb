"""A verdict that does not flap: persistence before escalation, hysteresis before easing."""

from __future__ import annotations

import random
from itertools import pairwise

from fastapi.testclient import TestClient

from app.health import stability
from app.health.stability import Memory, advance
from tests.app.conftest import running_run


def feed(raws: list[str | None], *, step_every: int = 5, live: bool = True) -> list[str | None]:
    """What is shown after each evaluation, one evaluation per ``step_every`` steps."""
    memory, shown = Memory(), []
    for i, raw in enumerate(raws, start=1):
        memory = advance(memory, raw, step=i * step_every, live=live, new_steps=True)
        shown.append(memory.shown)
    return shown


def test_a_one_batch_blip_never_escalates_and_resolves_after_hysteresis() -> None:
    shown = feed([None, "critical", None, None, None, None])
    assert "critical" not in shown
    assert shown == [None, "info", "info", "info", None, None]


def test_a_sustained_critical_is_confirmed_after_three_evaluations() -> None:
    assert feed(["critical"] * 4) == ["info", "info", "critical", "critical"]


def test_confirmation_also_needs_enough_steps() -> None:
    assert feed(["critical"] * 4, step_every=1) == ["info", "info", "info", "info"]
    assert feed(["critical"] * 6, step_every=1)[-1] == "critical"


def test_a_mixed_streak_moves_only_as_far_as_all_of_it_agrees() -> None:
    assert feed(["critical", "warning", "critical"]) == ["info", "info", "warning"]


def test_easing_needs_the_lower_severity_to_hold() -> None:
    confirmed = feed(["critical"] * 3)
    assert confirmed[-1] == "critical"
    memory = Memory(shown="critical")
    seen = []
    for step, raw in enumerate(["warning", "critical", "warning", "warning", "warning"], 1):
        memory = advance(memory, raw, step=100 + 10 * step, live=True, new_steps=True)
        seen.append(memory.shown)
    assert seen == ["critical", "critical", "critical", "critical", "warning"]


def test_evaluations_without_new_steps_do_not_count() -> None:
    memory = Memory()
    for _ in range(10):
        memory = advance(memory, "critical", step=50, live=True, new_steps=False)
    assert memory.shown is None


def test_imports_and_lost_show_the_detectors_at_once() -> None:
    assert feed(["critical"], live=False) == ["critical"]
    memory = advance(Memory(), "critical", step=1, live=True, new_steps=False, category="lost")
    assert memory.shown == "critical"


def test_noisy_condition_near_a_threshold_does_not_flip_flop() -> None:
    rng = random.Random(7)
    raws = [rng.choice(["warning", "critical", None]) for _ in range(300)]
    shown = feed(raws)
    changes = sum(1 for a, b in pairwise(shown) if a != b)
    raw_changes = sum(1 for a, b in pairwise(raws) if a != b)
    assert raw_changes > 150 and changes <= raw_changes // 10


def test_verdict_waits_for_evidence() -> None:
    assert stability.verdict([], steps=0, live=True) == "waiting"
    assert stability.verdict([], steps=2, live=False) == "insufficient"
    assert stability.verdict(["info"], steps=10, live=True) == "healthy"
    assert stability.verdict(["critical"], steps=2, live=True) == "critical"
    assert stability.label("waiting", live=False) == ("insufficient", "not enough data")


def _post(client: TestClient, run_id: int, headers: dict, steps: range, **metrics: object) -> None:
    rows = [{"step": s, "metrics": metrics} for s in steps]
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
    assert reply.status_code == 200, reply.text


def test_run_verdict_follows_confirmed_findings_only(client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "waiting"
    assert "waiting for data" in client.get(f"/runs/{run_id}/_findings").text
    for start in range(1, 40, 5):
        _post(client, run_id, headers, range(start, start + 5), reward=0.5, loss=0.01, grad_norm=1.0)
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "healthy"
    _post(client, run_id, headers, range(41, 43), reward=0.5, loss=0.01, grad_norm="nan")
    body = client.get(f"/api/runs/{run_id}/findings").json()
    assert body["verdict"] == "healthy"
    blip = next(f for f in body["findings"] if f["category"] == "numerical_instability")
    assert blip["severity"] == "info" and blip["confirming"] is True
    for start in (43, 48, 53):
        _post(client, run_id, headers, range(start, start + 5), reward=0.5, loss=0.01,
              grad_norm="nan")
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "critical"


def test_findings_settle_when_the_run_ends(client: TestClient) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, range(1, 30), reward=0.5, loss=0.01, grad_norm=1.0)
    _post(client, run_id, headers, range(30, 32), reward=0.5, loss=0.01, grad_norm="nan")
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "healthy"
    client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "critical"
