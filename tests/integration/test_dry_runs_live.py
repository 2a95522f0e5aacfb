"""Dry runs through the whole stack: the web app queues by task name, a real Celery worker
samples completions from builtin:tiny-random, scores them and posts the result back."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.conftest import tiny_spec
from tests.stack import Stack


def dry_run(stack: Stack, rewards: list[dict[str, Any]], timeout: float = 240) -> dict[str, Any]:
    reply = httpx.post(f"{stack.url}/api/dry-runs", params={"prompts": 2},
                       json=tiny_spec(name="dry", rewards=rewards))
    assert reply.status_code == 202, reply.text
    assert reply.json()["status"] == "queued" and reply.json()["verdict"] is None
    url = f"{stack.url}/api/dry-runs/{reply.json()['id']}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(url).json()
        if body["status"] != "queued":
            return body
        time.sleep(0.5)
    raise AssertionError(f"dry run not answered in {timeout} s:\n{stack.log('worker')}")


def test_constant_reward_reports_no_variation(stack: Stack) -> None:
    body = dry_run(stack, [{"name": "constant", "params": {"value": 1.0}},
                           {"name": "length_target", "weight": 0.0, "params": {"target": 20}}])
    assert body["status"] == "done", body["error"]
    assert body["zero_spread_share"] == 1.0 and body["verdict"] == "no_variation"
    assert body["rewards"]["constant"]["std"] == 0.0 and body["rewards"]["constant"]["count"] == 8
    assert body["rewards"]["length_target"]["count"] == 8  # sampled text was really scored
    result = body["result"]
    assert result["groups"] == 2 and len(result["examples"][0]["completions"]) == 4
    assert [r["group_size"] for r in result["group_size_advice"]] == [2, 4, 8, 16]
    page = httpx.get(f"{stack.url}/dry-runs/{body['id']}").text
    assert "this reward gives no variation" in page and 'id="group-size-advice"' in page


def test_a_raising_reward_shows_its_traceback(stack: Stack) -> None:
    body = dry_run(stack, [{"name": "debug_raise", "params": {"after_calls": 0}}])
    assert body["status"] == "failed" and body["verdict"] == "error"
    assert "Traceback" in body["error"]
    assert "debug_raise: reward function failed on call 1" in body["error"]
    page = httpx.get(f"{stack.url}/dry-runs/{body['id']}").text
    assert "reward function failed on call 1" in page and 'id="dry-run-error"' in page


def test_the_overlong_penalty_scores_the_sampled_token_ids(stack: Stack) -> None:
    """The dry run passes each completion's token ids as TRL does (``completion_ids``, cut
    after the end-of-sequence token): without them the penalty raises and the dry run fails."""
    body = dry_run(stack, [{"name": "overlong_penalty", "params": {"soft_share": 0.5}}])
    assert body["status"] == "done", body["error"]
    penalty = body["rewards"]["overlong_penalty"]
    assert penalty["count"] == 8 and penalty["missing"] == 0
    assert -1.0 <= penalty["min"] <= penalty["max"] <= 0.0
