"""Bug 4 (issue 7) on a real stack: a dataset uploaded through the API trains for real, and a
local file the worker does not have fails the run on the worker, which says so."""

from __future__ import annotations

import json

import httpx

from tests.stack import Stack

PROMPTS = [f"Upload prompt number {i}: say hello" for i in range(12)]


def test_an_uploaded_dataset_trains_and_its_prompts_reach_the_inspector(stack: Stack) -> None:
    body = "".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS)
    upload = httpx.post(f"{stack.url}/api/datasets", files={"file": ("mine.jsonl", body)}, timeout=30)
    assert upload.status_code == 201, upload.text
    run_id = stack.launch(name="it-upload", model="builtin:tiny-random", dataset="mine.jsonl",
                          num_generations=4, max_completion_length=8, max_steps=2,
                          rewards=[{"name": "length_target", "params": {"target": 5}}])
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    assert run["step"] == 2
    series = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", timeout=10).json()
    assert series["reward"]["steps"] == [1, 2]
    rollouts = httpx.get(f"{stack.url}/api/runs/{run_id}/rollouts", params={"step": 1}, timeout=10).json()
    shown = json.dumps(rollouts["groups"])
    assert any(p in shown for p in PROMPTS), shown[:500]


def test_a_file_missing_on_the_worker_fails_the_run_with_a_clear_reason(stack: Stack) -> None:
    run_id = stack.launch(name="it-missing", model="builtin:tiny-random", dataset="never-uploaded.jsonl",
                          num_generations=4, max_completion_length=8, max_steps=2)
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "failed"
    assert "'never-uploaded.jsonl' not found in this worker's datasets directory" in run["error"]
