"""Findings lead somewhere: each one links to the rollouts at its last step and to the charts
zoomed to its step range (the alerts' links), and one whose remedy is a change of settings
offers "Try this fix": the clone form pre-filled with the change and showing it, a smoke test
first, and the pair (before, after) on the compare page; an outside run gets the change as a
``GRPOConfig`` line for the user's own script."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.diagnostics import Diagnosis
from app.diagnostics.model import Finding
from app.health import service as health
from app.health.service import findings_for
from app.rollouts.service import store as store_rollouts
from app.runs import lifecycle, service
from app.runs.models import Run
from grpodeck.contract.wire import Completion, Group, RolloutStep
from tests.app.conftest import html, one, queued_run
from tests.app.test_clone import submitted
from tests.conftest import tiny_spec


def _zero_spread(first: int = 3, last: int = 9) -> Finding:
    return Finding(category="zero_reward_spread", severity="critical", first_step=first,
                   last_step=last, summary="no group had spread",
                   actions=["Increase num_generations"], metric="frac_reward_zero_std")


def _with_findings(run_id: int, *findings: Finding) -> int:
    """Store ``findings`` on the (ended) run; the id of the first one's record."""
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        run.current_step = 20
        if lifecycle.is_live(run):
            lifecycle.fail(run, "ended for the test")
        health.store(db, run, Diagnosis.from_findings(list(findings)), datetime.now(UTC))
        db.commit()
        return next(r.id for r in findings_for(db, run_id) if r.category == findings[0].category)


def test_each_finding_links_to_its_rollouts_step_and_zoomed_charts(client: TestClient) -> None:
    run_id, _ = queued_run(tiny_spec(name="links"))
    finding_id = _with_findings(run_id, _zero_spread(12, 47))
    entry = one(client.get(f"/runs/{run_id}").text, f"#finding-{finding_id}")
    assert one(str(entry), "a.finding-rollouts")["href"] == (
        f"/runs/{run_id}/rollouts?step=47&within=12-47")  # the nearest captured in 12-47
    assert one(str(entry), "a.finding-charts")["href"] == (
        f"/runs/{run_id}?steps=12-47#charts-panel")


def test_try_this_fix_fills_the_form_shows_the_change_and_opens_the_pair(
        client: TestClient) -> None:
    parent_id, _ = queued_run(tiny_spec(name="flat", num_generations=4, max_steps=30))
    finding_id = _with_findings(parent_id, _zero_spread())
    button = one(client.get(f"/runs/{parent_id}").text, f"#fix-{finding_id} a.try-fix-button")
    assert button["href"] == f"/runs/new?from={parent_id}&fix={finding_id}"

    page = client.get(button["href"]).text
    assert one(page, "#f-num_generations")["value"] == "8"
    row = one(page, '#fix-changes tr[data-key="num_generations"]')
    assert [td.get_text() for td in row.select("td")] == ["4", "8"]
    smoke = one(page, "#fix-smoke")
    assert smoke["formaction"] == "/runs/smoke" and "primary" in smoke["class"]
    assert "primary" not in one(page, "#launch")["class"]

    reply = client.post("/runs/smoke", data=submitted(one(page, "#run-form")),
                        follow_redirects=False)
    assert reply.status_code == 303, reply.text
    location = reply.headers["location"]
    assert location.startswith(f"/runs/compare?ids={parent_id},")
    with get_sessionmaker()() as db:
        fixed = db.get(Run, int(location.rsplit(",", 1)[1]))
        assert fixed.spec["num_generations"] == 8 and fixed.parent_id == parent_id
        assert fixed.smoke_full_steps == 30 and fixed.max_steps == 5  # a smoke test of the fix


def test_an_outside_run_gets_the_grpo_config_line_and_no_button(client: TestClient) -> None:
    with get_sessionmaker()() as db:
        run, _ = service.create_external_run(db, name="script", spec={"num_generations": 8})
        db.commit()
        run_id = run.id
    finding_id = _with_findings(run_id, _zero_spread())
    fix = one(client.get(f"/runs/{run_id}").text, f"#fix-{finding_id}")
    assert fix.select("a.try-fix-button") == []
    assert one(str(fix), "code.grpo-config").get_text() == "GRPOConfig(num_generations=16)"


def test_a_fix_only_for_the_clones_own_finding_with_a_settings_remedy(
        client: TestClient) -> None:
    parent_id, _ = queued_run(tiny_spec(name="a"))
    other_id, _ = queued_run(tiny_spec(name="b"))
    other_finding = _with_findings(other_id, _zero_spread())
    assert client.get(f"/runs/new?from={parent_id}&fix={other_finding}").status_code == 404
    assert client.get(f"/runs/new?fix={other_finding}").status_code == 404
    stall = _with_findings(parent_id, Finding(
        category="stalled", severity="warning", first_step=1, last_step=9,
        summary="flat reward", metric="reward"))
    reply = client.get(f"/runs/new?from={parent_id}&fix={stall}")
    assert reply.status_code == 409 and "no change of settings" in reply.json()["detail"]
    page = client.get(f"/runs/{parent_id}").text
    assert html(page).select(f"#fix-{stall}") == []


def test_a_length_explosion_fix_launches_the_clone_with_the_overlong_penalty(
        client: TestClient) -> None:
    parent_id, _ = queued_run(tiny_spec(name="long", max_completion_length=48))
    explosion = _with_findings(parent_id, Finding(
        category="length_explosion", severity="warning", first_step=1, last_step=9,
        summary="longer and longer", metric="completions/mean_length"))
    page = client.get(f"/runs/new?from={parent_id}&fix={explosion}").text
    row = one(page, '#fix-changes tr[data-key="rewards"]')
    assert "overlong_penalty" in row.select("td")[1].get_text()
    assert "overlong_penalty" not in row.select("td")[0].get_text()
    reply = client.post("/runs/smoke", data=submitted(one(page, "#run-form")),
                        follow_redirects=False)
    assert reply.status_code == 303, reply.text
    with get_sessionmaker()() as db:
        fixed = db.get(Run, int(reply.headers["location"].rsplit(",", 1)[1]))
        assert [r["name"] for r in fixed.spec["rewards"]][-1] == "overlong_penalty"
        assert fixed.spec["rewards"][-1]["params"] == {"max_length": 0, "soft_share": 0.2}
        assert fixed.spec["max_completion_length"] == 48


def test_a_group_size_fix_shows_the_zero_spread_share_expected_at_the_new_size(
        client: TestClient) -> None:
    """The parent's own groups (success rates 1/4, 0, 3/4, 1 at G=4; two of four without
    spread) give p^G + (1-p)^G per prompt: 66.0 % expected at G=4, 55.0 % at G=8."""
    parent_id, _ = queued_run(tiny_spec(name="flat", num_generations=4))
    totals = ([1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1], [1, 1, 1, 1])
    with get_sessionmaker()() as db:
        store_rollouts(db, parent_id, [RolloutStep(step=7, groups=[
            Group(index=i, prompt=f"p{i}", completions=[Completion(text="x", total=t) for t in ts])
            for i, ts in enumerate(totals)])])
        db.commit()
    finding_id = _with_findings(parent_id, _zero_spread())
    page = client.get(f"/runs/new?from={parent_id}&fix={finding_id}").text
    table = one(page, "#fix-group-sizes")
    assert "observed at G = 4: 50%" in " ".join(one(page, "#fix-group-sizes caption").text.split())
    cells = {tr["data-g"]: [td.get_text() for td in tr.select("td")] for tr in table.select("tbody tr")}
    assert cells["4"][1] == "66.0%" and cells["8"][1] == "55.0%"
    assert cells["8"][2:] == ["27.5%", "27.5%"]  # all fail: (.75^8 + 1 + .25^8 + 0) / 4


def test_a_group_size_fix_without_captured_rollouts_shows_no_table(client: TestClient) -> None:
    parent_id, _ = queued_run(tiny_spec(name="flat", num_generations=4))
    finding_id = _with_findings(parent_id, _zero_spread())
    page = html(client.get(f"/runs/new?from={parent_id}&fix={finding_id}").text)
    assert page.select("#fix-group-sizes") == [] and page.select("#fix-changes")


def test_no_larger_group_is_offered_where_the_findings_figures_say_it_cannot_help(
        client: TestClient) -> None:
    """Groups that all tie at exactly 0 of a reward that can go negative ("all_zero"): a larger
    group splits no tie, so neither the page nor the fix URL offers it (issue 54); a reward that
    never varies is no_reward_signal, which has no settings fix at all."""
    parent_id, _ = queued_run(tiny_spec(name="ties", num_generations=4, max_steps=30))
    tie = Finding(category="zero_reward_spread", severity="critical", first_step=3, last_step=9,
                  summary="all tie at 0", evidence={"kind": "all_zero"},
                  metric="frac_reward_zero_std")
    constant = Finding(category="no_reward_signal", severity="critical", first_step=1,
                       last_step=9, summary="constant", metric="reward")
    finding_id = _with_findings(parent_id, tie, constant)
    page = client.get(f"/runs/{parent_id}").text
    assert "try-fix-button" not in page and "Try this fix" not in page
    assert client.get(f"/runs/new?from={parent_id}&fix={finding_id}").status_code == 409
