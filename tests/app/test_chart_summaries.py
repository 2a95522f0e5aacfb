"""Each chart of the run page is also a sentence: last value, min and max per metric."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import one, running_run


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
