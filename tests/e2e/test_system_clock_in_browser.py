"""System charts read by the clock in a real browser: a date axis, live points appended at
their sample's time (the step in the tooltip), and a zoom of a training chart (steps) leaves
them alone, and theirs leaves the training charts alone."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.e2e.test_charts_stay_put import drag_zoom
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack

T0 = 1_800_000_000.0  # 2027-01-15: far from now, so no default axis could land on it


def report(live: Stack, run_id: int, headers: dict[str, str], steps: range) -> None:
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "loss": 0.0,
                                    "system/cpu_percent": 100.0 + s, "system/rss_bytes": 2e9 + s,
                                    "system/time": T0 + 30 * s}} for s in steps]
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers)
    assert reply.status_code == 200, reply.text


def test_system_charts_run_on_the_clock_live_and_zoom_apart(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, range(1, 11))
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-system_rss .main-svg").first).to_be_visible()
    rss = "document.getElementById('chart-system_rss')"
    assert page.evaluate(f"{rss}._fullLayout.xaxis.type") == "date"
    assert page.evaluate(f"{rss}.data[0].x[0]") == (T0 + 30) * 1000
    assert page.evaluate("document.getElementById('chart-reward')._fullLayout.xaxis.type") == (
        "linear")
    expect(page.locator("#chart-system_rss .xtitle")).to_have_text("wall-clock (UTC)")

    report(live, run_id, headers, range(11, 14))  # live: appended at their times
    page.wait_for_function(f"() => {rss}.data[0].x.length === 13")
    assert page.evaluate(f"{rss}.data[0].x[12]") == (T0 + 30 * 13) * 1000
    assert page.evaluate(f"{rss}.data[0].text[12]") == "step 13"
    assert page.evaluate("document.getElementById('chart-reward').data[0].x[12]") == 13

    drag_zoom(page, "chart-reward", 0.3, 0.6)  # steps: the training charts follow, not these
    page.wait_for_function("() => document.getElementById('chart-loss').layout.xaxis.autorange"
                           " === false")
    assert page.evaluate(f"{rss}.layout.xaxis.autorange") is not False
    page.locator("#chart-system_cpu").scroll_into_view_if_needed()
    drag_zoom(page, "chart-system_cpu", 0.2, 0.5)
    page.wait_for_function("() => document.getElementById('chart-system_cpu').layout.xaxis"
                           ".autorange === false")
    page.wait_for_timeout(300)  # a wrong sync would land within a frame or two
    step_range = page.evaluate("document.getElementById('chart-loss').layout.xaxis.range")
    assert step_range[1] < 100, step_range  # still steps, not the system chart's times


def test_samples_taken_within_one_step_are_drawn_live_each_at_its_time(page: Page,
                                                                        live: Stack) -> None:
    """An evaluation after step 3: the step stands still while the sampler goes on (issue 56,
    7a). Each of its samples is appended live at its own time, with step 3 in its tooltip, and
    a reload draws them all again (they were one point, the last)."""
    run_id, headers = reporting_run(live, name="eval-clock")
    report(live, run_id, headers, range(1, 4))
    page.goto(f"{live.url}/runs/{run_id}")
    cpu = "document.getElementById('chart-system_cpu')"
    expect(page.locator("#chart-system_cpu .main-svg").first).to_be_visible()
    assert page.evaluate(f"{cpu}.data[0].x.length") == 3
    times = [T0 + 100 + 10 * i for i in range(5)]
    rows = [{"step": 3, "metrics": {"system/cpu_percent": 50.0 + i, "system/rss_bytes": 3e9,
                                    "system/time": t}} for i, t in enumerate(times)]
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers)
    assert reply.status_code == 200, reply.text
    page.wait_for_function(f"() => {cpu}.data[0].x.length === 8")
    expected = [t * 1000 for t in times]
    assert page.evaluate(f"{cpu}.data[0].x.slice(3)") == expected
    assert page.evaluate(f"{cpu}.data[0].y.slice(3)") == [50.0, 51.0, 52.0, 53.0, 54.0]
    assert page.evaluate(f"{cpu}.data[0].text.slice(3)") == ["step 3"] * 5
    page.reload()
    expect(page.locator("#chart-system_cpu .main-svg").first).to_be_visible()
    assert page.evaluate(f"{cpu}.data[0].x.slice(3)") == expected
