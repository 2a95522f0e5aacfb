"""Rollouts in the shape README's ``log_rollouts`` shows (``text``, ``rewards`` per component,
``advantage``, no ``total``): their outcomes, spreads, filters and outcome chart; and the total
derived from a launched run's reward weights. In-process app, both database backends."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.charts.rollout_figures import OUTCOME_LABELS
from tests.app.conftest import running_run
from tests.conftest import tiny_spec


def completion(advantage: float, **rewards: float) -> dict[str, Any]:
    return {"text": f"answer {advantage}", "rewards": rewards, "advantage": advantage}


def readme_groups() -> list[dict[str, Any]]:
    """Group 0 learns (0.4/0.21/0.19/0.3); 1 scores nothing; 2 scores 1 everywhere."""
    scored = [(0.4, 1.2), (0.21, -0.7), (0.19, -0.9), (0.3, 0.4)]
    return [
        {"index": 0, "prompt": "What is 2+2?",
         "completions": [completion(a, correct=c, format=1.0) for c, a in scored]},
        {"index": 1, "prompt": "Prove it.",
         "completions": [completion(0.0, correct=0.0, format=0.0) for _ in range(4)]},
        {"index": 2, "prompt": "Say hi.",
         "completions": [completion(0.0, correct=1.0, format=1.0) for _ in range(4)]},
    ]


def external_run(client: TestClient) -> tuple[int, dict[str, str]]:
    reply = client.post("/api/runs", json={"source": "external", "name": "readme-shape"})
    assert reply.status_code == 201, reply.text
    return reply.json()["id"], {"Authorization": f"Bearer {reply.json()['token']}"}


def send(client: TestClient, run_id: int, headers: dict[str, str],
         groups: list[dict[str, Any]], step: int = 1) -> None:
    reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                        json={"rows": [], "rollouts": [{"step": step, "groups": groups}]})
    assert reply.status_code == 200, reply.text


def groups(client: TestClient, run_id: int, **params: Any) -> list[dict[str, Any]]:
    reply = client.get(f"/api/runs/{run_id}/rollouts", params={"step": 1, **params})
    assert reply.status_code == 200, reply.text
    return reply.json()["groups"]


def chart(client: TestClient, run_id: int) -> dict[str, list[float]]:
    """The outcome chart's traces on the inspector page: label -> shares per step."""
    import html
    import json
    import re

    page = client.get(f"/runs/{run_id}/rollouts").text
    for raw in re.findall(r'data-figure="([^"]*)"', page):
        figure = json.loads(html.unescape(raw))
        if "Group outcomes" in json.dumps(figure.get("layout", {})):
            return {t["name"]: list(t["y"]) for t in figure["data"]}
    raise AssertionError("no group-outcome chart on the page")


def test_readme_shaped_rollouts_are_mixed_or_no_total_never_all_fail(
        client: TestClient) -> None:
    run_id, headers = external_run(client)
    send(client, run_id, headers, readme_groups())
    got = groups(client, run_id)
    assert [g["outcome"] for g in got] == ["mixed", "no_total", "no_total"]
    assert [g["spread_of"] for g in got] == ["components"] * 3
    assert got[0]["reward_spread"] == pytest.approx(0.21)
    assert [g["reward_spread"] for g in got[1:]] == [0.0, 0.0]
    index = lambda **f: [g["index"] for g in groups(client, run_id, **f)]
    assert index(outcome="mixed") == [0]
    assert index(outcome="zero_spread") == [1, 2]
    assert index(outcome="no_total") == [1, 2]
    assert index(outcome="all_fail") == [] and index(outcome="all_pass") == []
    shares = chart(client, run_id)
    assert shares[OUTCOME_LABELS["mixed"]] == [pytest.approx(1 / 3)]
    assert shares[OUTCOME_LABELS["no_total"]] == [pytest.approx(2 / 3)]
    assert shares[OUTCOME_LABELS["all_fail"]] == [0.0]
    page = client.get(f"/runs/{run_id}/rollouts", params={"step": 1}).text
    assert "no total sent" in page and "component spread (no total sent)" in page


def test_a_group_without_any_number_is_no_total_and_not_zero_spread(
        client: TestClient) -> None:
    run_id, headers = external_run(client)
    send(client, run_id, headers, [{"index": 0, "prompt": "p",
                                    "completions": [{"text": "a"}, {"text": "b"}]}])
    (group,) = groups(client, run_id)
    assert (group["outcome"], group["reward_spread"], group["spread_of"]) == (
        "no_total", None, None)
    assert groups(client, run_id, outcome="zero_spread") == []


def test_a_launched_runs_weights_give_the_total(client: TestClient) -> None:
    spec = tiny_spec(rewards=[{"name": "length_target", "weight": 1.0},
                              {"name": "format_tag", "weight": 0.5}])
    run_id, headers = running_run(client, spec)
    weighted = [
        {"index": 0, "prompt": "a", "completions": [  # totals 0.5 and 1.0: mixed
            completion(-0.7, length_target=0.0, format_tag=1.0),
            completion(0.7, length_target=0.5, format_tag=1.0)]},
        {"index": 1, "prompt": "b", "completions": [  # totals 0: all fail
            completion(0.0, length_target=0.0, format_tag=0.0) for _ in range(2)]},
        {"index": 2, "prompt": "c", "completions": [  # totals 1.5: all pass
            completion(0.0, length_target=1.0, format_tag=1.0) for _ in range(2)]},
        {"index": 3, "prompt": "d", "completions": [  # a component without a weight
            completion(0.0, length_target=1.0, unknown=1.0) for _ in range(2)]},
    ]
    send(client, run_id, headers, weighted)
    got = groups(client, run_id)
    assert [g["outcome"] for g in got] == ["mixed", "all_fail", "all_pass", "no_total"]
    assert [c["total"] for c in got[0]["completions"]] == [0.5, 1.0]
    assert got[0]["completions"][0]["total_from"] == "weights"
    assert got[0]["reward_spread"] == pytest.approx(0.5) and got[0]["spread_of"] == "total"
    assert [c["total"] for c in got[3]["completions"]] == [None, None]
