"""Why a reward scored 0 travels with the rollout: stored, returned by the API, shown (escaped)
next to the completion in the inspector."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.conftest import running_run

XSS = "<script>window.pwned=1</script>"


def test_reasons_are_stored_returned_and_shown_escaped(client: TestClient) -> None:
    run_id, headers = running_run(client)
    completions = [
        {"text": "```python\nwhile True: pass\n```", "rewards": {"unit_tests": 0.0},
         "total": 0.0, "advantage": -0.5, "reasons": {"unit_tests": "timeout"}},
        {"text": "ok", "rewards": {"unit_tests": 0.0}, "total": 0.0, "advantage": 0.5,
         "reasons": {"unit_tests": f"crashed: NameError: {XSS}"}},
    ]
    body = {"rows": [{"step": 1, "metrics": {"reward": 0.0}}],
            "rollouts": [{"step": 1, "groups": [{"index": 0, "prompt": "Write f",
                                                  "completions": completions}]}]}
    assert client.post(f"/api/runs/{run_id}/metrics", json=body, headers=headers).status_code == 200
    stored = client.get(f"/api/runs/{run_id}/rollouts", params={"step": 1}).json()
    got = [c["reasons"] for c in stored["groups"][0]["completions"]]
    assert got == [{"unit_tests": "timeout"}, {"unit_tests": f"crashed: NameError: {XSS}"}]
    page = client.get(f"/runs/{run_id}/rollouts", params={"step": 1}).text
    assert 'class="chip reason"' in page and ">timeout</span>" in page
    assert XSS not in page and "&lt;script&gt;window.pwned=1" in page
