"""Runs started through the MLflow-compatible API without a name (``mlflow.start_run()``, TRL's
``report_to="mlflow"`` without ``run_name``) were every one "mlflow run" (issue 56): MLflow's own
server names such a run ``adjective-animal-NNN``; the Deck now does the same, each name distinct
from the runs it already has. The bodies are what ``mlflow==3.17.2``'s RestStore sends."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

API = "/mlflow/api/2.0/mlflow"
GENERATED = re.compile(r"^[a-z]+-[a-z]+-\d{1,3}$")
# mlflow.start_run() with no run_name: no run_name field, only the context tags
UNNAMED = {"experiment_id": "0", "start_time": 1796606617643, "user_id": "root",
           "tags": [{"key": "mlflow.user", "value": "root"},
                    {"key": "mlflow.source.name", "value": "train.py"},
                    {"key": "mlflow.source.type", "value": "LOCAL"}]}


def test_unnamed_runs_get_distinct_readable_names(client: TestClient) -> None:
    names = []
    for _ in range(12):
        made = client.post(f"{API}/runs/create", json=UNNAMED)
        assert made.status_code == 200, made.text
        info = made.json()["run"]["info"]
        stored = client.get(f"/api/runs/{info['run_id']}").json()["name"]
        assert stored == info["run_name"]  # the client prints the name the Deck shows
        names.append(stored)
    assert all(GENERATED.match(n) for n in names), names
    assert len(set(names)) == len(names), names


def test_a_given_name_is_still_the_runs_own(client: TestClient) -> None:
    made = client.post(f"{API}/runs/create", json={**UNNAMED, "run_name": "grpo-qwen"})
    assert made.json()["run"]["info"]["run_name"] == "grpo-qwen"
    tagged = client.post(f"{API}/runs/create", json={**UNNAMED, "tags": [
        {"key": "mlflow.runName", "value": "from-tag"}]})
    assert tagged.json()["run"]["info"]["run_name"] == "from-tag"
