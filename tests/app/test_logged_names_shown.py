"""A key the Deck reads under its own name (``lr`` as learning_rate, ``mean_reward`` as reward)
keeps the name the user logged beside the canonical one wherever that is shown (issue 56): the
chart's heading and legend, the charts in words, the checked metrics, the compare page's
metric list and chart titles. The renames are the run's own reading (``runs.metric_reading``),
the same for an imported log and a run reported live through the MLflow API."""

from __future__ import annotations

import json

import numpy as np
from fastapi.testclient import TestClient

from tests.app.conftest import html, one

API = "/mlflow/api/2.0/mlflow"


def loop_log(steps: int = 40) -> str:
    """A hand-written loop's prints with its own spellings (the ``loop`` vocabulary)."""
    rng = np.random.default_rng(3)
    return "".join(f"step {s} | mean_reward: {0.2 + 0.01 * s + rng.normal(0, 0.02):.4f} | "
                   f"KL: {0.01 + 0.0001 * s:.5f} | lr: {1e-6 * (1 - s / 100):.3g}\n"
                   for s in range(1, steps + 1))


def imported(client: TestClient, name: str) -> int:
    reply = client.post("/api/imports", files={"log": ("loop.log", loop_log().encode())},
                        data={"name": name})
    assert reply.status_code == 201, reply.text
    return int(reply.json()["runs"][0]["id"])


def figure(page: str, key: str) -> dict:  # type: ignore[type-arg]
    return json.loads(one(page, f"#chart-{key}")["data-figure"])  # type: ignore[arg-type]


def check_run_page(page: str) -> None:
    assert one(page, "#chart-title-learning_rate").get_text() == "Learning rate (logged as lr)"
    assert "logged as mean_reward" in one(page, "#chart-title-reward").get_text()
    [trace] = [t for t in figure(page, "learning_rate")["data"] if t.get("meta") != "band"]
    assert trace["name"] == "learning_rate (lr)" and trace["legendgroup"] == "learning_rate"
    assert one(page, "#summary-learning_rate").get_text().startswith(
        "Learning rate (logged as lr):")
    assert "reward (mean_reward)" in one(page, "#coverage-checked").get_text()
    assert "kl (KL)" in one(page, "#coverage-checked").get_text()


def test_an_imported_runs_own_names_stay_beside_the_canonical_ones(client: TestClient) -> None:
    run_id = imported(client, "loop")
    check_run_page(client.get(f"/runs/{run_id}").text)
    fragment = client.get(f"/runs/{run_id}/_charts").text  # what a live page fetches
    assert figure(fragment, "learning_rate")["data"][0]["name"] == "learning_rate (lr)"


def test_a_run_reported_through_mlflow_shows_its_own_names(client: TestClient) -> None:
    made = client.post(f"{API}/runs/create", json={"experiment_id": "0", "run_name": "live"})
    run_id = made.json()["run"]["info"]["run_id"]
    rng = np.random.default_rng(4)
    for step in range(1, 41):
        batch = {"run_id": run_id, "metrics": [
            {"key": "mean_reward", "value": 0.2 + rng.normal(0, 0.02), "step": step,
             "timestamp": 1796606617000 + step},
            {"key": "KL", "value": 0.01, "step": step, "timestamp": 1796606617000 + step},
            {"key": "lr", "value": 1e-6, "step": step, "timestamp": 1796606617000 + step}]}
        assert client.post(f"{API}/runs/log-batch", json=batch).status_code == 200
    client.post(f"{API}/runs/update", json={"run_id": run_id, "status": "FINISHED"})
    check_run_page(client.get(f"/runs/{run_id}").text)


def test_the_compare_page_lists_and_titles_the_logged_names(client: TestClient) -> None:
    first, second = imported(client, "a"), imported(client, "b")
    page = client.get(f"/runs/compare?ids={first},{second}&metrics=learning_rate,reward").text
    labels = [label.get_text(" ", strip=True) for label in
              html(page).select("#compare-metrics label.check")]
    assert "learning_rate (lr)" in labels and "reward (mean_reward)" in labels
    titles = [json.loads(c["data-figure"])["layout"]["title"]["text"]  # type: ignore[arg-type]
              for c in html(page).select("[data-figure]")]
    assert titles == ["learning_rate (lr)", "reward (mean_reward)"]
