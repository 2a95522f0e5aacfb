"""Run page details in a real browser (issue 56): the system charts' heading is a section heading
above them, not a line inside the CPU card."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack


def post_rows(live: Stack, run_id: int, headers: dict[str, str], rows: list[dict]) -> None:  # type: ignore[type-arg]
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers)
    assert reply.status_code == 200, reply.text


def box(page: Page, selector: str) -> dict[str, float]:
    found = page.locator(selector).bounding_box()
    assert found is not None, selector
    return found


def heading_above_the_system_charts(page: Page) -> None:
    """The group's heading is a row of its own right above the CPU card, not inside it."""
    heading = page.locator("#chart-group-system")
    expect(heading).to_contain_text("System")
    assert heading.evaluate("(h) => h.closest('.chart-box') === null")  # not in the CPU card
    assert heading.evaluate("(h) => h.nextElementSibling.dataset.key") == "system_cpu"
    top, cpu, panel = box(page, "#chart-group-system"), box(
        page, ".chart-box[data-key=system_cpu]"), box(page, "#charts-panel")
    assert top["y"] + top["height"] <= cpu["y"]  # above the card
    assert abs(top["x"] - panel["x"]) < 2 and top["width"] > panel["width"] * 0.95  # full row
    # no card shares the heading's row; the training cards sit above it
    for key in ("system_rss", "reward", "loss"):
        card = box(page, f".chart-box[data-key={key}]")
        beside = card["y"] < top["y"] + top["height"] and card["y"] + card["height"] > top["y"]
        assert not beside, key
    assert box(page, ".chart-box[data-key=loss]")["y"] < top["y"]


def test_the_system_heading_is_a_section_heading_above_the_system_charts(desk: Page,
                                                                         live: Stack) -> None:
    """Drawn by the server, and merged in live when the first samples arrive (the charts'
    shape changed: static/charts.js inserts the new group with its heading)."""
    run_id, headers = reporting_run(live, name="system-heading")
    post_rows(live, run_id, headers, [{"step": s, "metrics": {"reward": 0.1 * s, "loss": 1.0}}
                                      for s in range(1, 3)])
    desk.goto(f"{live.url}/runs/{run_id}")
    expect(desk.locator("#chart-loss .main-svg").first).to_be_visible()
    post_rows(live, run_id, headers, [
        {"step": s, "metrics": {"reward": 0.1 * s, "loss": 1.0, "system/cpu_percent": 50.0,
                                "system/rss_bytes": 1e9, "system/time": 1.8e9 + 10 * s}}
        for s in range(3, 6)])
    expect(desk.locator("#chart-system_cpu .main-svg").first).to_be_visible(timeout=20_000)
    heading_above_the_system_charts(desk)
    desk.reload()
    expect(desk.locator("#chart-system_cpu .main-svg").first).to_be_visible()
    heading_above_the_system_charts(desk)
