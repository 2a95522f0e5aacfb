"""Charts first: a run with five or more findings shows each as one line (severity, title, step
range, key number, first action), so the first chart starts in the first screen on a desktop
and on a phone; a finding opens to its evidence in words and every action in full, with the
detector's internals (sigmas, rho, yes/no) behind a nested "details"."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.ingest import pipeline
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.diagnostics.conftest import healthy_cols, rows_from
from tests.stack import Stack

BATCH = 20  # steps per ingest call: the findings are confirmed over several evaluations


def troubled_rows() -> list[tuple[int, dict]]:
    """300 steps with six problems at once (reference shapes of tests/diagnostics): too hard
    (zero spread), entropy collapse, KL blow-up, truncation, stalled reward, gradient spikes."""
    steps, c = healthy_cols(300, 1)
    t = steps / 300
    r = np.random.default_rng(9)
    c["entropy"] = np.where(t < 0.3, 0.9, 0.04) + r.normal(0, 0.005, len(steps))
    c["kl"] = 0.01 * np.exp(7 * t) + np.abs(r.normal(0, 0.005, len(steps)))
    c["frac_reward_zero_std"] = np.clip(0.97 + r.normal(0, 0.01, len(steps)), 0, 1)
    c["reward"] = np.clip(0.03 + r.normal(0, 0.01, len(steps)), 0, 1)
    c["completions/clipped_ratio"] = np.clip(0.9 + r.normal(0, 0.04, len(steps)), 0, 1)
    grad = c["grad_norm"].copy()
    grad[[40, 120, 200]] = 60.0
    c["grad_norm"] = grad
    return rows_from(steps, **c)


def troubled_run(live: Stack) -> int:
    """A finished run diagnosed by the real pipeline, batch by batch as a worker reports."""
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            run, _ = service.create_run(db, spec=RunSpec(name="troubled", max_steps=300))
            db.commit()
            run_id = run.id
        rows = troubled_rows()
        for start in range(0, len(rows), BATCH):
            with Session(engine) as db:
                run = service.get_run_for_update(db, run_id)
                pipeline.receive(db, run, rows[start:start + BATCH])
                db.commit()
        with Session(engine) as db:
            run = service.get_run_for_update(db, run_id)
            run.status = "succeeded"
            db.commit()
    finally:
        engine.dispose()
    return run_id


@pytest.fixture(scope="module")
def run_id(live: Stack) -> int:
    return troubled_run(live)


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_first_chart_is_in_the_first_screen_with_five_findings(
        page: Page, live: Stack, run_id: int, size: tuple[int, int]) -> None:
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live.url}/runs/{run_id}")
    findings = page.locator("#findings-panel details.finding")
    assert findings.count() >= 5
    first_chart = page.locator("#charts-panel .chart-box").first
    expect(first_chart.locator(".main-svg").first).to_be_visible()
    top = first_chart.bounding_box()["y"]  # type: ignore[index]
    assert top + 120 <= height, f"the first chart starts at {top:.0f} px of a {height} px screen"
    # each finding is one line: severity, title, steps, its key number and first action
    kl = page.locator('#findings-panel details.finding[data-category="kl_blowup"]')
    line = kl.locator("summary")
    expect(line.locator(".sev")).to_have_text("critical")
    expect(line.locator(".finding-steps")).to_contain_text("steps ")
    expect(line.locator(".key-number")).to_contain_text("KL ")
    expect(line.locator(".first-action")).not_to_be_empty()
    assert kl.get_attribute("open") is None
    # a phone folds the lines after the third under "N more"; a desktop shows them all
    more = page.locator("#more-findings")
    expect(more.locator("> summary")).to_have_text(f"{findings.count() - 3} more findings")
    assert (more.get_attribute("open") is None) == (width < 600)


def test_an_opened_finding_reads_in_words_and_shows_every_action(
        page: Page, live: Stack, run_id: int) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live.url}/runs/{run_id}")
    page.locator("#more-findings > summary").click()  # folded on a phone
    finding = page.locator('#findings-panel details.finding[data-category="stalled"]')
    finding.locator("summary.finding-line").click()
    body = finding.locator(".finding-body")
    expect(body.locator(".summary")).to_be_visible()
    actions = body.locator("ol.actions")
    expect(actions).to_be_visible()
    # nothing of the action text is clipped: no box scrolls inside the finding
    clipped = body.evaluate("""(el) => [el, ...el.querySelectorAll('*')].filter((n) =>
        n.scrollHeight > n.clientHeight + 1 && getComputedStyle(n).overflowY !== 'visible').length""")
    assert clipped == 0
    # the detector's internals wait behind "details", in words (no Python True/False)
    internals = body.locator("details.internals")
    expect(internals.locator("table.evidence")).to_be_hidden()
    assert "rho" not in body.locator(":scope > :not(details.internals)").all_inner_texts().__str__()
    internals.locator("summary").click()
    table = internals.locator("table.evidence")
    expect(table).to_be_visible()
    expect(table).to_contain_text("rank correlation")  # rank_trend_rho, in words
    text = page.locator("#findings-panel").inner_text()
    assert "True" not in text and "False" not in text
