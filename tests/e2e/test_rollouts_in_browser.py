"""The rollout inspector in a real browser: model output stays inert text, filters swap groups."""

from __future__ import annotations

import os

import httpx
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.runs import service
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
