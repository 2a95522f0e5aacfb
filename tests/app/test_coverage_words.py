"""The health panel's coverage in words (issue 56, 8c): "4 checks could not run" read as an error
for absences a run's own settings explain. A check whose metric the run's settings rule out (no
eval split, beta 0, no GPU) is "not applicable" with that reason; only the others are listed as
not run for lack of data. The API says the same (``not_applicable``)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import one, running_run


def report(client: TestClient, run_id: int, headers: dict[str, str], steps: range) -> None:
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "reward_std": 0.2, "entropy": 1.0,
                                    "loss": 0.1, "grad_norm": 1.0,
                                    "system/cpu_percent": 90.0, "system/rss_bytes": 1e9}}
            for s in steps]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200


def test_absences_the_settings_explain_are_not_applicable(client: TestClient) -> None:
    run_id, headers = running_run(client, beta=0.0, eval_split=None, max_steps=40)
    report(client, run_id, headers, range(1, 11))
    body = client.get(f"/api/runs/{run_id}/findings").json()
    assert body["not_applicable"] == {
        "divergence": "no eval split", "kl_level": "beta is 0: no KL penalty",
        "kl_spikes": "beta is 0: no KL penalty", "oom_risk": "no GPU in use"}
    assert set(body["not_applicable"]) <= set(body["unchecked"])  # the API's list stays whole
    page = client.get(f"/runs/{run_id}").text
    summary = one(page, "#coverage summary").get_text(" ", strip=True)
    assert "could not" not in summary
    assert "4 checks not applicable" in summary
    lacking = len(body["unchecked"]) - 4
    assert f"{lacking} check{'s' if lacking != 1 else ''} without data" in summary
    words = one(page, "#coverage-not-applicable").get_text(" ", strip=True)
    assert words.startswith("not applicable:")
    assert "divergence (no eval split)" in words and "kl level (beta is 0: no KL penalty)" in words
    assert "oom risk (no GPU in use)" in words
    missing = one(page, "#coverage-unchecked").get_text(" ", strip=True)
    assert missing.startswith("not run, for lack of data:") and "divergence" not in missing


def test_a_run_that_could_have_the_metric_lists_it_as_lacking_data(client: TestClient) -> None:
    run_id, headers = running_run(client, beta=0.04, eval_split="test", eval_steps=10,
                                  max_steps=40)
    report(client, run_id, headers, range(1, 6))
    body = client.get(f"/api/runs/{run_id}/findings").json()
    assert body["not_applicable"] == {"oom_risk": "no GPU in use"}
    missing = one(client.get(f"/runs/{run_id}").text, "#coverage-unchecked").get_text(" ")
    assert "divergence (needs eval_reward)" in missing and "kl level (needs kl)" in missing
