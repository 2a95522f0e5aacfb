"""Issue 22 point 6: a metric or run name with markup is shown as text in plotly charts, never
as a live link, on the comparison page (the chart's title and legend) and on the run page (the
legend), and the run page's live updates still find the metric by its real name."""

from __future__ import annotations

from urllib.parse import urlencode

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack

METRIC = '<a href="https://example.com/x">x</a>'
COMPONENT = f"rewards/{METRIC}/mean"  # drawn on the run page's "Reward components" chart
RUN_NAME = '<a href="https://example.com/run">run</a>'


def report(live: Stack, run_id: int, headers: dict[str, str], steps: range) -> None:
    rows = [{"step": s, "metrics": {METRIC: 0.1 * s, COMPONENT: 0.2 * s, "reward": 0.1 * s}}
            for s in steps]
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers)
    assert reply.status_code == 200, reply.text


def assert_inert(chart: Locator) -> None:
    """No link anywhere in the chart's SVG (plotly draws <a href> in titles and legends)."""
    expect(chart.locator(".main-svg").first).to_be_visible()
    expect(chart.locator("a")).to_have_count(0)


def test_markup_in_metric_and_run_names_is_text_on_compare(page: Page, live: Stack) -> None:
    ids = []
    for i in range(2):
        run_id, headers = reporting_run(live, f"{RUN_NAME} {i}")
        report(live, run_id, headers, range(1, 6))
        ids.append(run_id)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/runs/compare?" + urlencode({"ids": f"{ids[0]},{ids[1]}",
                                                       "metrics": METRIC}))
    chart = page.locator("#compare-charts .chart").first
    assert_inert(chart)
    expect(chart.locator(".gtitle")).to_have_text(METRIC)  # the title, literally
    expect(chart.locator(".legendtext")).to_have_text([f"#{run_id} {RUN_NAME} {n}"
                                                       for n, run_id in enumerate(ids)])
    assert errors == []


def test_markup_in_a_metric_name_is_text_on_the_run_page_and_live(page: Page,
                                                                   live: Stack) -> None:
    run_id, headers = reporting_run(live, "markup-metric")
    report(live, run_id, headers, range(1, 6))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/runs/{run_id}")
    chart = page.locator("#chart-components")
    assert_inert(chart)
    expect(chart.locator(".legendtext")).to_have_text([COMPONENT])
    report(live, run_id, headers, range(6, 9))  # live: found by its real name, appended
    page.wait_for_function(
        "() => document.querySelector('#chart-components').data[0].x.length === 8",
        timeout=15_000)
    assert_inert(chart)
    assert errors == []
