"""The bell counts open unacknowledged alerts on every page and updates without a reload;
the /alerts page acknowledges with a button."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.alerts.helpers import zero_spread
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack


def count(live: Stack) -> int:
    return httpx.get(f"{live.url}/api/alerts/count", timeout=10).json()["open_unacknowledged"]


def test_the_bell_counts_new_alerts_without_a_reload(page: Page, live: Stack) -> None:
    before = count(live)
    page.goto(f"{live.url}/runs")
    bell = page.locator("#alert-count")
    expect(bell).to_have_text(str(before))
    page.evaluate("window.__sameDocument = true")
    run_id, headers = reporting_run(live)
    rows = zero_spread(range(1, 61))
    for start in range(0, 60, 10):
        reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics",
                           json={"rows": rows[start:start + 10]}, headers=headers, timeout=30)
        assert reply.status_code == 200
    assert count(live) == before + 1
    expect(bell).to_have_text(str(before + 1), timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    page.goto(f"{live.url}/alerts?run={run_id}")
    expect(page.locator(".alert-item")).to_have_count(1)
    expect(page.locator(".alert-item")).to_contain_text("zero reward spread")
    page.click(".alert-item button.ack")
    expect(page.locator(".alert-item")).to_contain_text("acknowledged")
    expect(page.locator("#alert-count")).to_have_text(str(before))


def test_an_alerts_chart_link_zooms_the_charts_to_its_steps(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    rows = zero_spread(range(1, 61))
    for start in range(0, 60, 10):
        httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows[start:start + 10]},
                   headers=headers, timeout=30)
    alert = httpx.get(f"{live.url}/api/alerts", params={"run_id": run_id}).json()[0]
    page.goto(f"{live.url}/alerts?run={run_id}")
    page.click(f"#alert-{alert['id']} a:has-text('charts at steps')")
    page.wait_for_url(f"**/runs/{run_id}?steps=*")
    low, high = alert["first_step"] - 0.5, alert["last_step"] + 0.5
    page.wait_for_function(
        "([lo, hi]) => { const el = document.querySelector('#chart-reward');"
        " const r = el && el.layout && el.layout.xaxis.range;"
        " return !!r && r[0] === lo && r[1] === hi; }", arg=[low, high], timeout=15_000)
