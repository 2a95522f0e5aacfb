"""The rollout inspector in a real browser: model output stays inert text, filters swap groups,
a finding's link lands on captured rollouts and every captured step is reachable."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime

import httpx
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.diagnostics import Diagnosis
from app.diagnostics.model import Finding
from app.health import service as health
from app.health.service import findings_for
from app.runs import service
from app.runs.models import Run
from grpodeck.contract.spec import RunSpec
from tests.app.test_rollouts import step_payload
from tests.stack import Stack


def reporting_run(live: Stack, name: str = "xss-run",
                  **spec: object) -> tuple[int, dict[str, str]]:
    """A run as a worker would see it: created in the stack's database, claimed with its ticket."""
    engine = make_engine(live.database_url)
    with Session(engine) as db:
        run, ticket = service.create_run(db, spec=RunSpec(name=name, model="builtin:tiny-random",
                                                          **spec))
        db.commit()
        run_id = run.id
    engine.dispose()
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/claim", json={},
                       headers={"Authorization": f"Bearer {ticket}"})
    assert reply.status_code == 200, reply.text
    return run_id, {"Authorization": f"Bearer {reply.json()['token']}"}


def test_completions_render_inert_and_filters_work(page: Page, live: Stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_id, headers = reporting_run(live)
    body = {"rows": [{"step": s, "metrics": {"reward": 0.1 * s}} for s in (1, 2, 3)],
            "rollouts": [step_payload(s) for s in (1, 2, 3)]}
    assert httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json=body, headers=headers).status_code == 200
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{live.url}/runs/{run_id}/rollouts")
    expect(page.locator("#groups-summary")).to_contain_text("4 groups at step 3")
    # the hostile completion is shown as text, and nothing of it ran
    expect(page.locator("pre.text", has_text="<script>window.pwned=1</script>").first).to_be_visible()
    assert page.evaluate("window.pwned") is None and not dialogs
    assert page.locator("article img").count() == 0
    # long completions are folded, with a way to expand
    details = page.locator("article[data-group='3'] details").first
    expect(details.locator("pre.text")).to_be_hidden()
    details.locator("summary").click()
    expect(details.locator("pre.text")).to_be_visible()
    # filters swap the groups in place (htmx), on the chosen step
    page.select_option("#f-step", "1")
    page.select_option("#f-outcome", "all_fail")
    expect(page.locator("#groups article")).to_have_count(1)
    expect(page.locator("#groups article")).to_have_attribute("data-group", "1")
    page.select_option("#f-outcome", "")
    page.fill("#f-q", "hello hello")
    expect(page.locator("#groups article")).to_have_count(1)
    expect(page.locator("#groups article .completion.adv-neg")).to_have_count(1)
    # group outcomes chart is drawn
    expect(page.locator(".chart .main-svg").first).to_be_visible()
    page.screenshot(path=os.environ.get("GRPODECK_SHOT3", str(tmp_path / "rollouts.png")),
                    full_page=True)
    assert page.evaluate("window.pwned") is None and not dialogs


CAPTURED = list(range(10, 310, 10))  # 30 captured steps: more than the 404 used to list


def sparse_run(live: Stack) -> tuple[int, int, int]:
    """An ended run with rollouts captured every 10 steps and two findings whose last step
    was not captured: steps 95-127 (120 inside the range, 130 nearer 127 but outside it) and
    steps 301-340 (no step of it captured: 300 is the nearest). Their record ids."""
    run_id, headers = reporting_run(live, name="sparse-captures")
    body = {"rows": [{"step": s, "metrics": {"reward": 0.1}} for s in CAPTURED],
            "rollouts": [step_payload(s) for s in CAPTURED]}
    assert httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json=body,
                      headers=headers).status_code == 200
    assert httpx.post(f"{live.url}/api/runs/{run_id}/finished", json={"returncode": 0},
                      headers=headers).status_code == 200
    found = [Finding(category=c, severity="warning", first_step=a, last_step=b, summary="s",
                     actions=["look"], metric="reward")
             for c, a, b in (("stalled", 95, 127), ("reward_collapse", 301, 340))]
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            health.store(db, db.get(Run, run_id), Diagnosis.from_findings(found),
                         datetime.now(UTC))
            db.commit()
            ids = {r.category: r.id for r in findings_for(db, run_id)}
    finally:
        engine.dispose()
    return run_id, ids["stalled"], ids["reward_collapse"]


def test_a_findings_rollouts_link_lands_on_captured_rollouts_and_older_steps_are_reachable(
        page: Page, live: Stack) -> None:
    """Issue 56: "rollouts at step N" led to a 404 when no rollouts were captured at N (which
    listed only the newest 20 captured steps). It lands on the nearest captured step inside
    the finding's range, or the nearest at all, and says so; the older and newer captured
    steps are a click away."""
    run_id, stalled, collapse = sparse_run(live)
    page.goto(f"{live.url}/runs/{run_id}")
    page.locator(f"#finding-{stalled} summary").click()
    page.locator(f"#finding-{stalled} a.finding-rollouts").click()
    expect(page.locator("#groups-summary")).to_contain_text("4 groups at step 120")
    expect(page.locator("#step-moved")).to_have_text(
        "No rollouts were captured at step 127; this is step 120, the nearest captured step "
        "in the finding's steps 95–127.")
    expect(page.locator("#f-step")).to_have_value("120")
    expect(page.locator("#f-step option")).to_have_count(len(CAPTURED) + 1)  # + all steps
    page.click("#older-step")
    expect(page.locator("#groups-summary")).to_contain_text("at step 110")
    expect(page.locator("#step-moved")).to_have_count(0)
    page.click("#newer-step")
    expect(page.locator("#groups-summary")).to_contain_text("at step 120")
    page.select_option("#f-step", "10")  # the oldest captured step
    expect(page.locator("#groups-summary")).to_contain_text("at step 10")
    expect(page.locator("#older-step")).to_have_count(0)
    expect(page.locator("#newer-step")).to_have_attribute("href", re.compile(r"step=20\b"))

    page.goto(f"{live.url}/runs/{run_id}")
    page.locator(f"#finding-{collapse} summary").click()
    page.locator(f"#finding-{collapse} a.finding-rollouts").click()
    expect(page.locator("#groups-summary")).to_contain_text("4 groups at step 300")
    expect(page.locator("#step-moved")).to_have_text(
        "No rollouts were captured in the finding's steps 301–340; this is step 300, the "
        "nearest captured step.")
