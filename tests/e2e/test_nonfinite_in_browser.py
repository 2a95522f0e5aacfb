"""A diverging run (NaN and inf metrics) renders its charts in a real browser, with the NaN/inf
marker drawn where the line breaks and the values listed under the chart; a NaN that arrives
while the page is open gets its marker too."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack


def report(live: Stack, run_id: int, headers: dict[str, str], rows: list[dict]) -> None:
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers)
    assert reply.status_code == 200, reply.text


def test_nan_and_inf_metrics_render_with_markers(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "loss": 0.0}} for s in range(1, 6)]
    rows += [{"step": 6, "metrics": {"reward": "nan", "loss": 0.0}},
             {"step": 7, "metrics": {"reward": "inf", "loss": 0.0}},
             {"step": 8, "metrics": {"reward": 0.8, "loss": 0.0}}]
    report(live, run_id, headers, rows)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/runs/{run_id}")
    chart = page.locator("#chart-reward")
    expect(chart.locator(".main-svg").first).to_be_visible()
    # the marker trace is drawn: its text labels are in the SVG
    expect(chart.locator(".scatterlayer .textpoint text", has_text="NaN")).to_have_count(1)
    expect(chart.locator(".scatterlayer .textpoint text", has_text="inf")).to_have_count(1)
    expect(page.locator("#nonfinite-reward")).to_have_text(
        "2 non-finite values: NaN at step 6; inf at step 7")
    drawn = page.evaluate("document.querySelector('#chart-reward').data[0].y")
    assert drawn[5:7] == [None, None]

    # live: a NaN arrives while the page is open -> the chart is rebuilt with its marker
    report(live, run_id, headers, [{"step": 9, "metrics": {"reward": "nan", "loss": 0.0}}])
    expect(page.locator("#nonfinite-reward")).to_have_text(
        "3 non-finite values: NaN at steps 6, 9; inf at step 7", timeout=15_000)
    expect(chart.locator(".scatterlayer .textpoint text", has_text="NaN")).to_have_count(2)
    assert errors == []
