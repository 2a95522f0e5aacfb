"""A live run page appends new points to its charts without re-rendering them, and adds a chart
when a new metric appears (static/charts.js merges the server's fragment)."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack


def report(live: Stack, run_id: int, headers: dict[str, str], steps: range, **extra: float) -> None:
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "loss": 0.0, **extra}} for s in steps]
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
    assert reply.status_code == 200


def points(page: Page, chart: str) -> int:
    return page.evaluate(f"document.querySelector('#chart-{chart}').data[0].x.length")


def test_live_points_are_appended_then_a_chart_added_for_a_new_metric(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, range(1, 4))
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible()
    assert points(page, "reward") == 3
    page.evaluate("document.querySelector('#chart-reward').dataset.marker = 'first-render'")
    report(live, run_id, headers, range(4, 9))
    page.wait_for_function("() => document.querySelector('#chart-reward').data[0].x.length === 8")
    # same element: the points were appended, not re-rendered
    assert page.evaluate("document.querySelector('#chart-reward').dataset.marker") == "first-render"
    assert page.evaluate("document.querySelector('#chart-reward').data[0].x") == list(range(1, 9))
    report(live, run_id, headers, range(9, 10), entropy=1.2)
    expect(page.locator("#chart-entropy")).to_be_visible(timeout=15_000)
    # the existing chart is the same element, redrawn with the server's figure: wait for it
    page.wait_for_function("() => { const el = document.querySelector('#chart-reward');"
                           " return el.data && el.data[0].x.length === 9; }")
