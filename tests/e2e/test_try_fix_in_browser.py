"""From finding to fix in a real browser (Debian chromium): a run whose groups never had reward
spread -> its finding's "Try this fix" -> the clone form pre-filled with num_generations doubled
and the change shown -> the smoke test launched -> the pair (before,
after) opens on the compare page."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.ingest import pipeline
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.e2e.test_pages_in_browser import desk, serious_violations  # noqa: F401 (fixture)
from tests.stack import TERMINAL, Stack

STEPS = 8  # an exact, total zero-spread signal is judged on a few rows (a smoke run's length)


def zero_spread_run(live: Stack) -> int:
    """A finished tiny run whose prompts are too hard: almost every group scores all 0, a rare
    success now and then, diagnosed by the real pipeline as a worker's reports are. (A reward
    that is the same for every completion is no_reward_signal, which offers no larger group:
    issue 54.)"""
    spec = RunSpec(name="too hard", model="builtin:tiny-random", num_generations=2,
                   max_steps=STEPS, rewards=[{"name": "exact_answer"}])
    rows = [(s, {"reward": 0.05 if s % 3 == 0 else 0.0, "reward_std": 0.02,
                 "frac_reward_zero_std": 0.97, "loss": 0.0}) for s in range(1, STEPS + 1)]
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            run, _ = service.create_run(db, spec=spec)
            db.commit()
            run_id = run.id
        with Session(engine) as db:
            run = service.get_run_for_update(db, run_id)
            pipeline.receive(db, run, rows)
            run.status = "succeeded"
            db.commit()
    finally:
        engine.dispose()
    return run_id


def test_try_this_fix_launches_a_smoke_test_and_compares_the_pair(desk: Page,  # noqa: F811
                                                                   live: Stack) -> None:
    """Also: no serious axe violation on the opened finding and on the fix's form."""
    page = desk  # 1440x900, the page's CSP bypassed so the test can inject axe-core
    before = zero_spread_run(live)
    page.goto(f"{live.url}/runs/{before}")
    finding = page.locator('#findings-panel details.finding[data-category="zero_reward_spread"]')
    finding.locator("summary.finding-line").click()
    assert serious_violations(page) == []  # the opened finding: its links and its fix
    finding.get_by_role("link", name="Try this fix").click()

    expect(page).to_have_url(re.compile(rf"/runs/new\?from={before}&fix=\d+$"))
    finding_id = int(page.url.rsplit("=", 1)[1])
    expect(page.locator("#f-num_generations")).to_have_value("4")
    expect(page.locator("#f-name")).to_have_value("too hard · fix: num_generations 2→4")
    change = page.locator('#fix-changes tr[data-key="num_generations"] td')
    expect(change).to_have_text(["2", "4"])
    assert serious_violations(page) == []
    page.locator("#fix-smoke").click()

    expect(page).to_have_url(re.compile(rf"/runs/compare\?ids={before},\d+$"))
    after = int(page.url.rsplit(",", 1)[1])
    expect(page.locator(f"#compare-run-{before}")).to_be_visible()
    expect(page.locator(f"#compare-run-{after}")).to_be_visible()
    spec = httpx.get(f"{live.url}/api/runs/{after}").json()["spec"]
    assert (spec["num_generations"], spec["max_steps"]) == (4, 5)  # a smoke test of the fix
    page.goto(f"{live.url}/runs/{after}")  # it says which finding it answers, and links back
    answers = page.locator("#answers-finding")
    expect(answers).to_contain_text(f"zero reward spread #{finding_id} of run #{before}")
    answers.get_by_role("link", name=f"zero reward spread #{finding_id}").click()
    expect(page).to_have_url(f"{live.url}/runs/{before}#finding-{finding_id}")
    # launched is what this test is about: stop it so the shared worker is free for the others
    assert httpx.post(f"{live.url}/api/runs/{after}/cancel").status_code == 200
    live.wait_for(after, TERMINAL)
