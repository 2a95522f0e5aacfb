"""A "Try this fix" run says what it is (issue 56): the form names it after its parent and the
change ("flat · fix: num_generations 4→8", not the parent's name again), and the run launched
from it (directly, as a smoke test, or as a smoke test's full run) remembers the finding it
answers and shows "answers finding … of run N" on its page, linking back to that finding."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs.models import Run
from tests.app.conftest import html, one, queued_run
from tests.app.test_clone import submitted
from tests.app.test_try_fix import _with_findings, _zero_spread
from tests.conftest import tiny_spec


def _fix_form(client: TestClient, parent_name: str = "flat") -> tuple[int, int, str]:
    """A parent run with a zero-spread finding: (parent id, finding id, the fix's form page)."""
    parent_id, _ = queued_run(tiny_spec(name=parent_name, num_generations=4, max_steps=30))
    finding_id = _with_findings(parent_id, _zero_spread())
    page = client.get(f"/runs/new?from={parent_id}&fix={finding_id}")
    assert page.status_code == 200, page.text
    return parent_id, finding_id, page.text


def _new_id(location: str) -> int:
    return int(location.rsplit(",", 1)[-1] if "compare" in location
               else location.rsplit("/", 1)[-1])


def _answers(run_id: int) -> tuple[int | None, str | None]:
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        return run.answers_finding_id, run.answers_category


def _assert_page_answers(client: TestClient, run_id: int, parent_id: int,
                         finding_id: int) -> None:
    line = one(client.get(f"/runs/{run_id}").text, "#answers-finding")
    assert "answers finding" in line.get_text() and "zero reward spread" in line.get_text()
    assert f"of run #{parent_id}" in " ".join(line.get_text().split())
    hrefs = [a["href"] for a in line.select("a")]
    assert f"/runs/{parent_id}#finding-{finding_id}" in hrefs


def test_a_fix_clone_is_named_for_its_change(client: TestClient) -> None:
    _, _, page = _fix_form(client)
    assert one(page, "#f-name")["value"] == "flat · fix: num_generations 4→8"


def test_a_fix_of_a_fix_names_the_latest_change_not_both(client: TestClient) -> None:
    _, _, page = _fix_form(client, parent_name="flat · fix: num_generations 2→4")
    assert one(page, "#f-name")["value"] == "flat · fix: num_generations 4→8"


def test_a_long_parent_name_is_cut_so_the_change_stays_whole(client: TestClient) -> None:
    _, _, page = _fix_form(client, parent_name="x" * 120)
    name = one(page, "#f-name")["value"]
    assert len(name) <= 120 and name.endswith("… · fix: num_generations 4→8")


def test_the_launched_fix_answers_its_finding_and_links_back(client: TestClient) -> None:
    parent_id, finding_id, page = _fix_form(client)
    reply = client.post("/runs/new", data=submitted(one(page, "#run-form")),
                        follow_redirects=False)
    assert reply.status_code == 303, reply.text
    fixed = _new_id(reply.headers["location"])
    assert _answers(fixed) == (finding_id, "zero_reward_spread")
    _assert_page_answers(client, fixed, parent_id, finding_id)
    with get_sessionmaker()() as db:
        assert db.get(Run, fixed).name == "flat · fix: num_generations 4→8"


def test_a_smoke_test_of_a_fix_and_its_full_run_answer_the_finding(client: TestClient) -> None:
    parent_id, finding_id, page = _fix_form(client)
    reply = client.post("/runs/smoke", data=submitted(one(page, "#run-form")),
                        follow_redirects=False)
    assert reply.status_code == 303, reply.text
    smoke = _new_id(reply.headers["location"])
    assert _answers(smoke) == (finding_id, "zero_reward_spread")
    full = client.post(f"/runs/{smoke}/launch-full", follow_redirects=False)
    assert full.status_code == 303, full.text
    full_id = _new_id(full.headers["location"])
    assert _answers(full_id) == (finding_id, "zero_reward_spread")
    _assert_page_answers(client, full_id, parent_id, finding_id)  # the finding's run, not
    # its parent (the smoke test)


def test_a_plain_clone_answers_nothing(client: TestClient) -> None:
    parent_id, _ = queued_run(tiny_spec(name="plain", max_steps=30))
    form = submitted(one(client.get(f"/runs/new?from={parent_id}").text, "#run-form"))
    assert one(client.get(f"/runs/new?from={parent_id}").text, "#f-name")["value"] == "plain"
    reply = client.post("/runs/new", data=form, follow_redirects=False)
    assert reply.status_code == 303, reply.text
    clone = _new_id(reply.headers["location"])
    assert _answers(clone) == (None, None)
    assert html(client.get(f"/runs/{clone}").text).select("#answers-finding") == []


def test_a_fix_finding_of_another_run_is_refused_on_launch(client: TestClient) -> None:
    """The hidden ``fix`` field is checked again on POST: a finding of another run is not
    recorded as answered."""
    parent_id, _, page = _fix_form(client)
    other_id, _ = queued_run(tiny_spec(name="other", num_generations=4, max_steps=30))
    foreign = _with_findings(other_id, _zero_spread())
    data = {**submitted(one(page, "#run-form")), "fix": str(foreign)}
    reply = client.post("/runs/new", data=data, follow_redirects=False)
    assert reply.status_code == 404
    with get_sessionmaker()() as db:
        assert db.query(Run).filter(Run.parent_id == parent_id).count() == 0
