"""The inspector page: filters live in the URL, search covers prompts, long completions open
whole, "follow" says how often a prompt was seen, and the count says what a step really kept."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import html, one, running_run
from tests.app.test_rollouts import step_payload

LONG = "BEGIN " + "middle " * 200 + "THE END"


def _post(client: TestClient, run_id: int, headers: dict[str, str], steps: list[dict]) -> None:  # type: ignore[type-arg]
    body = {"rows": [{"step": s["step"], "metrics": {"reward": 0.1}} for s in steps], "rollouts": steps}
    reply = client.post(f"/api/runs/{run_id}/metrics", json=body, headers=headers)
    assert reply.status_code == 200, reply.text


@pytest.fixture
def two_steps(client: TestClient) -> int:
    """A run with the same four prompts captured at steps 1 and 2."""
    run_id, headers = running_run(client)
    _post(client, run_id, headers, [step_payload(1), step_payload(2)])
    return run_id


def test_fragment_puts_the_filters_in_the_page_url(client: TestClient, two_steps: int) -> None:
    run_id = two_steps
    reply = client.get(f"/runs/{run_id}/rollouts/_groups",
                       params={"step": "1", "outcome": "all_fail", "truncated": "", "q": "",
                               "sort": "index"}, headers={"HX-Request": "true"})
    pushed = urlsplit(reply.headers["HX-Push-Url"])
    assert pushed.path == f"/runs/{run_id}/rollouts"  # the page, never the fragment
    assert dict(parse_qsl(pushed.query)) == {"step": "1", "outcome": "all_fail", "sort": "index"}
    page = client.get(reply.headers["HX-Push-Url"]).text  # the shared link shows the same view
    assert one(page, "#f-step option[selected]")["value"] == "1"
    assert one(page, "#f-outcome option[selected]")["value"] == "all_fail"
    assert [a["data-group"] for a in html(page).select("#groups article")] == ["1"]
    assert "1 of 4 groups at step 1 match the filters" in one(page, "#groups-summary").text


def test_search_finds_prompts_too(client: TestClient, two_steps: int) -> None:
    run_id = two_steps
    page = client.get(f"/runs/{run_id}/rollouts", params={"q": "count to THREE"}).text
    found = html(page).select("#groups article")
    assert {(a["data-step"], a["data-group"]) for a in found} == {("1", "1"), ("2", "1")}
    assert one(page, "#f-q")["value"] == "count to THREE"


def test_long_completion_opens_whole_and_follow_counts_steps(client: TestClient) -> None:
    run_id, headers = running_run(client)
    first, second = step_payload(1), step_payload(2)
    first["groups"][3]["completions"][0]["text"] = LONG
    second["groups"] = second["groups"][:1]  # only "Say hi" comes back at step 2
    _post(client, run_id, headers, [first, second])
    page = client.get(f"/runs/{run_id}/rollouts", params={"step": "1"}).text
    card = one(page, "article[data-group='3']")
    assert card.select_one("details pre.full").text == LONG  # whole, not the preview again
    assert card.select_one("pre.preview").text.startswith("BEGIN middle")
    assert card.select_one("a.follow") is None  # "Write code" was seen at one step only
    follow = one(page, "article[data-group='0'] a.follow")
    assert "its 2 captured steps" in follow.text


def test_count_is_honest_about_what_a_batch_holds(client: TestClient) -> None:
    run_id, headers = running_run(client, num_generations=2, rollout_groups=4)
    step = step_payload(1)
    step["groups"] = step["groups"][:1]  # a batch of one group of 2: one group is all there is
    _post(client, run_id, headers, [step])
    summary = one(client.get(f"/runs/{run_id}/rollouts").text, "#groups-summary").text
    assert "1 kept of 4 asked per step" in summary
    assert "a step's batch of 2 completions holds 1 group" in summary
