"""Rollouts through the report API: storage, filters, prompt history, signals, bounds, escaping."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import html, one, running_run

XSS = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">"


def completion(text: str, reward: float, advantage: float, truncated: bool = False) -> dict:
    return {"text": text, "rewards": {"length_target": reward, "format_tag": 1.0 if reward > 0 else 0.0},
            "total": reward, "advantage": advantage, "length": 16 if truncated else 5,
            "truncated": truncated}


def step_payload(step: int) -> dict:
    return {"step": step, "groups": [
        {"index": 0, "prompt": "Say hi", "completions": [
            completion("hi there", 1.0, 0.87), completion("hello hello hello hello hello", -1.0, -0.87)]},
        {"index": 1, "prompt": "Count to three", "completions": [
            completion("", 0.0, 0.0), completion("", 0.0, 0.0)]},
        {"index": 2, "prompt": "Be brief", "completions": [
            completion("ok", 0.5, 0.0, truncated=True), completion("ok", 0.5, 0.0)]},
        {"index": 3, "prompt": "Write code", "completions": [
            completion(XSS + " " + "x" * 900, 0.2, 0.7), completion("print(1)", 0.1, -0.7)]},
    ]}


@pytest.fixture
def run_with_rollouts(client: TestClient) -> tuple[int, dict[str, str]]:
    run_id, headers = running_run(client)
    body = {"rows": [{"step": s, "metrics": {"reward": 0.1}} for s in (1, 2)],
            "rollouts": [step_payload(1), step_payload(2)]}
    reply = client.post(f"/api/runs/{run_id}/metrics", json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    return run_id, headers


def get(client: TestClient, run_id: int, **params) -> dict:  # type: ignore[no-untyped-def]
    reply = client.get(f"/api/runs/{run_id}/rollouts", params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_groups_are_stored_with_outcomes(client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    run_id, _ = run_with_rollouts
    body = get(client, run_id, step=1)
    assert body["steps"] == [1, 2] and body["step"] == 1
    assert [g["outcome"] for g in body["groups"]] == ["mixed", "all_fail", "all_pass", "mixed"]
    first = body["groups"][0]["completions"][0]
    assert first["rewards"]["length_target"] == 1.0 and first["advantage"] == 0.87
    assert get(client, run_id)["step"] == 2  # latest by default
    assert client.get(f"/api/runs/{run_id}/rollouts", params={"step": 7}).status_code == 404


def test_filters(client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    run_id, _ = run_with_rollouts
    indices = lambda **p: [g["index"] for g in get(client, run_id, step=1, **p)["groups"]]
    assert indices(outcome="zero_spread") == [1, 2]
    assert indices(outcome="all_fail") == [1] and indices(outcome="all_pass") == [2]
    assert indices(outcome="mixed") == [0, 3]
    assert indices(truncated="true") == [2]
    assert indices(sort="advantage_high")[0] == 0 and indices(sort="advantage_low")[0] == 0
    assert indices(component="length_target", min_value=0.9) == [0]
    assert indices(component="format_tag", max_value=0.0) == [0, 1]
    assert indices(q="HELLO") == [0]
    everywhere = get(client, run_id, q="print(1)")
    assert everywhere["step"] is None and {g["step"] for g in everywhere["groups"]} == {1, 2}


def test_follow_one_prompt_across_steps(client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    run_id, _ = run_with_rollouts
    key = get(client, run_id, step=1)["groups"][0]["prompt_key"]
    history = client.get(f"/api/runs/{run_id}/rollouts/prompt/{key}").json()
    assert history["prompt"] == "Say hi" and [g["step"] for g in history["groups"]] == [1, 2]
    page = client.get(f"/runs/{run_id}/rollouts/prompt/{key}")
    assert page.status_code == 200 and page.text.count('class="group panel') == 2


def degenerate(client: TestClient, run_id: int) -> dict[str, str]:
    body = client.get(f"/api/runs/{run_id}/findings").json()
    return {f["metric"]: f["severity"] for f in body["findings"]
            if f["category"] == "degenerate_completions"}


def test_signals_become_metrics_and_feed_diagnostics(client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    run_id, headers = run_with_rollouts
    series = client.get(f"/api/runs/{run_id}/metrics").json()
    assert series["rollouts/empty_frac"] == {"steps": [1, 2], "values": [0.25, 0.25]}
    assert series["rollouts/identical_group_frac"]["steps"] == [1, 2]
    assert series["rollouts/identical_group_frac"]["values"][0] == pytest.approx(0.5)
    assert degenerate(client, run_id) == {}  # two captured steps, a quarter empty: fine
    silent = [{"step": s, "groups": [
        {"index": g, "prompt": f"P{g}", "completions": [completion(" ", 0.0, 0.0)] * 4}
        for g in range(4)]} for s in range(3, 21)]  # the policy now answers nothing
    seen = []
    for start in range(0, len(silent), 3):  # the way a worker sends them: small batches
        reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                            json={"rows": [], "rollouts": silent[start:start + 3]})
        assert reply.status_code == 200, reply.text
        seen.append(degenerate(client, run_id).get("rollouts/empty_frac"))
    # shown first as confirming (info), critical only once it held: a blip never escalates
    assert "info" in seen and seen.index("info") < seen.index("critical"), seen
    assert degenerate(client, run_id) == {"rollouts/empty_frac": "critical",
                                          "rollouts/identical_group_frac": "warning"}
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "critical"
    panel = one(client.get(f"/runs/{run_id}").text, "#findings-panel")
    shown = panel.select('details.finding[data-category="degenerate_completions"]')
    # one element per category, the worst first; the other metric listed under "Also seen"
    # one line until opened (templates/runs/_findings.html)
    assert len(shown) == 1 and "resolved" not in shown[0]["class"] and not shown[0].has_attr("open")
    assert shown[0].select_one(".sev").get_text(strip=True) == "critical"
    also = [li.get_text(" ", strip=True) for li in shown[0].select("ul.also li")]
    assert len(also) == 1 and also[0].startswith("warning on rollouts/identical_group_frac")
    assert "(resolved)" not in also[0]


def test_resending_a_step_replaces_it(client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    run_id, headers = run_with_rollouts
    fresh = {"step": 2, "groups": [{"index": 0, "prompt": "A new prompt", "completions": [
        completion("first answer", 1.0, 1.1), completion("second answer", 0.0, -1.1),
        completion("third answer", 0.5, 0.0)]}]}
    reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                        json={"rows": [], "rollouts": [fresh]})
    assert reply.status_code == 200, reply.text
    groups = get(client, run_id, step=2)["groups"]
    assert [(g["prompt"], g["outcome"]) for g in groups] == [("A new prompt", "mixed")]
    assert [c["text"] for c in groups[0]["completions"]] == [
        "first answer", "second answer", "third answer"]
    assert len(get(client, run_id, step=1)["groups"]) == 4  # the other step is untouched
    series = client.get(f"/api/runs/{run_id}/metrics").json()  # and so are its signals
    assert series["rollouts/empty_frac"] == {"steps": [1, 2], "values": [0.25, 0.0]}
    assert series["rollouts/identical_group_frac"]["values"] == [0.5, 0.0]


def test_a_step_sent_twice_in_one_batch_keeps_its_last_groups(client: TestClient) -> None:
    """The batch's steps are replaced with one DELETE: a step twice in it must not insert its
    groups twice (the unique key would refuse the whole batch)."""
    run_id, headers = running_run(client)
    again = {"step": 1, "groups": [{"index": 0, "prompt": "Later", "completions": [
        completion("later answer", 1.0, 0.0)]}]}
    reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                        json={"rows": [], "rollouts": [step_payload(1), again, step_payload(2)]})
    assert reply.status_code == 200, reply.text
    assert [g["prompt"] for g in get(client, run_id, step=1)["groups"]] == ["Later"]
    assert len(get(client, run_id, step=2)["groups"]) == 4


def test_two_groups_under_one_index_are_refused_by_name_and_nothing_is_lost(
        client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    """Two groups of one step under one index would collide in the store (a 500 on PostgreSQL,
    found by the API fuzzer): the batch is a 422 naming the index; what was stored stays."""
    run_id, headers = run_with_rollouts
    twice = {"step": 3, "groups": [g | {"index": 7} for g in step_payload(3)["groups"][:2]]}
    reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                        json={"rows": [{"step": 3, "metrics": {"reward": 0.2}}],
                              "rollouts": [twice]})
    assert reply.status_code == 422, reply.text
    assert "group index 7 appears twice in one step" in reply.text
    assert client.get(f"/api/runs/{run_id}/rollouts", params={"step": 3}).status_code == 404
    assert len(get(client, run_id, step=2)["groups"]) == 4
    assert client.get(f"/api/runs/{run_id}/metrics").json()["reward"]["steps"] == [1, 2]


def test_storage_is_bounded(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.core.config import get_settings

    monkeypatch.setattr(get_settings(), "rollout_max_steps", 10)
    run_id, headers = running_run(client)
    for start in range(1, 61, 10):
        client.post(f"/api/runs/{run_id}/metrics", headers=headers,
                    json={"rows": [], "rollouts": [step_payload(s) for s in range(start, start + 10)]})
    steps = get(client, run_id)["steps"]
    assert len(steps) <= 10 and steps[0] == 1 and steps[-1] == 60
    assert len(set(range(1, 61)) - set(steps)) >= 50


@pytest.mark.one_backend
def test_inspector_page_escapes_model_output(client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    run_id, _ = run_with_rollouts
    page = client.get(f"/runs/{run_id}/rollouts", params={"step": 1}).text
    assert "<script>window.pwned" not in page and "&lt;script&gt;window.pwned=1" in page
    assert "<img src=x" not in page
    assert "show all" in page  # the long completion is folded
    fragment = client.get(f"/runs/{run_id}/rollouts/_groups", params={"step": 1, "outcome": "all_fail"})
    assert fragment.text.count('class="group panel') == 1 and "(empty completion)" in fragment.text


@pytest.mark.one_backend  # which step is shown: no storage difference
def test_a_step_without_rollouts_shows_the_nearest_captured_one(
        client: TestClient, run_with_rollouts) -> None:  # type: ignore[no-untyped-def]
    """Issue 56: a finding's last step is rarely a captured one; its page was a 404 listing
    the newest 20 captured steps. It shows the nearest (inside the finding's range first) and
    says so; the API stays a 404 for a step it does not have, naming the nearest."""
    run_id, _ = run_with_rollouts  # captured: steps 1 and 2
    moved = "No rollouts were captured"
    for params, shown, words in (
            ({"step": 7}, 2, f"{moved} at step 7; this is step 2, the nearest captured step."),
            ({"step": 7, "within": "0-1"}, 1,
             (f"{moved} at step 7; this is step 1, the nearest captured step in the finding's "
             "steps 0–1.")),
            ({"step": 9, "within": "5-9"}, 2,
             f"{moved} in the finding's steps 5–9; this is step 2, the nearest captured step.")):
        page = client.get(f"/runs/{run_id}/rollouts", params=params)
        assert page.status_code == 200, page.text
        assert one(page.text, "#step-moved").get_text() == words
        assert one(page.text, "#f-step option[selected]")["value"] == str(shown)
    assert html(client.get(f"/runs/{run_id}/rollouts?step=2").text).select("#step-moved") == []
    pager = one(client.get(f"/runs/{run_id}/rollouts?step=2&outcome=mixed").text, "#step-pager")
    assert pager.select_one("#older-step")["href"] == (
        f"/runs/{run_id}/rollouts?step=1&outcome=mixed")
    assert pager.select("#newer-step") == []
    api = client.get(f"/api/runs/{run_id}/rollouts", params={"step": 7})
    assert api.status_code == 404
    assert "the nearest captured step is 2 (2 captured, steps 1 to 2" in api.json()["detail"]
