"""Each chart of the run page is also a sentence: last value, min and max per metric."""

from __future__ import annotations

import math

from fastapi.testclient import TestClient

from app.core.config import get_settings
from tests.app.conftest import metric_rows_read, one, receive, running_run


def test_each_chart_has_a_sentence_with_last_min_max(client: TestClient) -> None:
    run_id, headers = running_run(client)
    rewards = {1: 0.5, 2: -0.25, 3: 2.0, 4: 1.5}
    rows = [{"step": s, "metrics": {"reward": r, "eval_reward": r / 2, "kl": 0.01 * s}}
            for s, r in rewards.items()]
    rows.append({"step": 5, "metrics": {"kl": "NaN"}})
    reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
    assert reply.status_code == 200, reply.text
    page = client.get(f"/runs/{run_id}").text
    reward = one(page, "#summary-reward").get_text(" ", strip=True)
    assert "reward last 1.5 at step 4, min -0.25, max 2 (4 points)" in reward
    assert "eval_reward last 0.75 at step 4, min -0.125, max 1 (4 points)" in reward
    kl = one(page, "#summary-kl").get_text(" ", strip=True)  # one metric: no name repeated
    assert "last NaN at step 5, min 0.01, max 0.04 (5 points)" in kl
    fragment = client.get(f"/runs/{run_id}/_summaries").text  # what a live page polls
    assert one(fragment, "#chart-summaries")["hx-get"] == f"/runs/{run_id}/_summaries"
    assert "last 1.5 at step 4" in one(fragment, "#summary-reward").text


def test_a_long_runs_page_reads_its_summaries_not_its_points(client: TestClient) -> None:
    """20,000 steps x 3 metrics: the whole run page (charts and sentences) and the polled
    sentences read about as many rows as they draw. An aggregate over the points once made the
    100k-step page 10x slower than the 1k-step one."""
    run_id, _ = running_run(client, name="long")
    steps = 20_000
    receive(run_id, [(s, {"reward": 0.1 * math.sin(s / 40) + (5.0 if s == 12_345 else 0.0),
                          "kl": math.nan if s == steps else 0.001 * (s % 97),
                          "entropy": 1.0 - s / steps})
                     for s in range(1, steps + 1)])
    assert client.get(f"/runs/{run_id}").status_code == 200  # brings the coarse levels up to date
    with metric_rows_read() as counts:
        page = client.get(f"/runs/{run_id}").text
        fragment = client.get(f"/runs/{run_id}/_summaries").text
    assert sum(counts) <= get_settings().chart_max_points * 3 < steps, counts
    reward = one(fragment, "#summary-reward").get_text(" ", strip=True)
    assert f"max {5.0 + 0.1 * math.sin(12_345 / 40):.4g} ({steps} points)" in reward
    assert f"last NaN at step {steps}" in one(page, "#summary-kl").get_text(" ", strip=True)
    assert "last 0 at step 20000, min 0, max 1 (20000 points)" in one(page, "#summary-entropy").get_text(" ", strip=True)
