"""The run page's reading aids in a real browser: a small deferred plotly bundle, EMA smoothing
over faint raw points, markers only on short lines, a unified hover, one x-range for all charts
(a toggle), a remembered log scale for KL and grad norm, and legends clear of the axis titles."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.e2e.test_charts_stay_put import drag_zoom, report
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack

MAX_JS_BYTES = 2_000_000  # the full plotly.js bundle alone is 4.8 MB; the cartesian one 1.5 MB


def ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's debiased EMA, as the page computes it (kept within the values seen)."""
    last, out = 0.0, []
    for n, v in enumerate(values, start=1):
        last = last * weight + (1 - weight) * v
        seen = values[:n]
        out.append(min(max(seen), max(min(seen), last / (1 - weight ** n))))
    return out


def close(actual: list[float], expected: list[float]) -> bool:
    return len(actual) == len(expected) and all(
        abs(a - b) < 1e-9 for a, b in zip(actual, expected, strict=True))


def rows(steps: range) -> list[dict]:
    return [{"step": s, "metrics": {
        "reward": (s % 7) / 10, "loss": 0.5, "kl": 0.001 * s, "grad_norm": 1.0 + s % 3,
        "reward_std": 0.2, "frac_reward_zero_std": 0.25, "entropy": 1.0}} for s in steps]


def double_click_reset(page: Page, chart_id: str, deadline_s: float = 60) -> None:
    """Double-click a chart's plot area, as a reader does to show every step again, until that
    chart took it as a double-click. Plotly counts one by the time between the two mousedowns
    as its handlers run (``doubleClickDelay``, 300 ms); the driver sends the four mouse events
    one after another, each acknowledged, and on a loaded machine (CI, load 10) the second
    mousedown reached the page later than that: plotly read two single clicks, which do
    nothing in zoom mode. The clicked chart's own reset tells such a missed gesture (tried
    again) from linked charts that failed to follow (the caller's wait fails on those)."""
    reset = f"() => document.getElementById('{chart_id}').layout.xaxis.autorange === true"
    deadline = time.monotonic() + deadline_s
    while True:
        page.locator(f"#{chart_id} .nsewdrag").first.dblclick()
        try:
            page.wait_for_function(reset, timeout=5_000)
            return
        except PlaywrightTimeout:
            assert time.monotonic() < deadline, f"{chart_id} never took a double-click"


def chart(page: Page, key: str, expr: str):  # type: ignore[no-untyped-def]
    return page.evaluate(f"(() => {{ const el = document.getElementById('chart-{key}'); return {expr}; }})()")


def test_the_run_page_loads_a_small_deferred_plotly_bundle(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, rows(range(1, 4)))
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible()
    scripts = page.evaluate("performance.getEntriesByType('resource')"
                            ".filter((e) => e.initiatorType === 'script')"
                            ".map((e) => [e.name, e.encodedBodySize])")
    assert sum(size for _, size in scripts) < MAX_JS_BYTES, scripts
    assert page.locator("script[src*='/static/plotly/']").evaluate("(s) => s.defer")


def test_smoothing_markers_hover_and_legends(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, rows(range(1, 61)))
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-entropy .main-svg").first).to_be_visible()
    # smoothing on by default: raw points faint, an EMA line beside them
    raw = chart(page, "reward", "el.data[0]")
    smoothed = chart(page, "reward", "el.data.find((t) => t.meta === 'smoothed')")
    assert raw["opacity"] < 1 and raw["mode"] == "lines"  # 60 points: no markers
    assert close(smoothed["y"], ema(raw["y"], 0.6))
    for key, value in (("loss", 0.5), ("entropy", 1.0)):  # constant: exactly flat, no zigzag
        assert set(chart(page, key, "el.data.find((t) => t.meta === 'smoothed').y")) == {value}
    page.locator("#chart-smoothing").fill("0")
    page.wait_for_function("() => !document.getElementById('chart-reward').data"
                           ".some((t) => t.meta === 'smoothed')")
    assert chart(page, "reward", "el.data[0].opacity") == 1
    page.locator("#chart-smoothing").fill("0.9")
    page.wait_for_function("() => document.getElementById('chart-reward').data"
                           ".some((t) => t.meta === 'smoothed')")
    smoothed = chart(page, "reward", "el.data.find((t) => t.meta === 'smoothed')")
    assert close(smoothed["y"], ema(raw["y"], 0.9))
    page.reload()  # remembered
    expect(page.locator("#chart-smoothing")).to_have_value("0.9")

    # live: new points extend the smoothed line too, continuing the same average
    report(live, run_id, headers, rows(range(61, 64)))
    page.wait_for_function("() => document.getElementById('chart-reward').data"
                           ".every((t) => t.meta === 'nonfinite' || t.x.length === 63)")
    raw = chart(page, "reward", "el.data[0]")
    smoothed = chart(page, "reward", "el.data.find((t) => t.meta === 'smoothed')")
    assert close(smoothed["y"], ema(raw["y"], 0.9))

    # every chart names its series in a legend that does not cover the x-axis title
    for key in ("reward", "spread", "entropy", "kl", "grad_norm", "loss"):
        legend = page.locator(f"#chart-{key} .legend").bounding_box()
        title = page.locator(f"#chart-{key} .g-xtitle").bounding_box()
        assert legend and title, key
        assert legend["y"] + legend["height"] <= title["y"], key
    expect(page.locator("#chart-entropy .legend .traces")).to_have_count(1)
    expect(page.locator("#chart-title-reward")).to_have_text("Reward")

    # one hover for every trace at a step
    box = page.locator("#chart-spread .nsewdrag").first.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = page.locator("#chart-spread .hoverlayer")
    expect(hover).to_contain_text("reward_std")
    expect(hover).to_contain_text("frac_reward_zero_std")
    expect(hover).to_contain_text(re.compile(r"step \d+"))


def test_markers_go_when_a_live_line_grows_past_fifty_points(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, rows(range(1, 49)))
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-loss .main-svg").first).to_be_visible()
    assert chart(page, "loss", "el.data[0].mode") == "lines+markers"
    report(live, run_id, headers, rows(range(49, 55)))
    page.wait_for_function("() => document.getElementById('chart-loss').data[0].mode === 'lines'",
                           timeout=15_000)


def test_shared_x_range_toggle_and_remembered_log_scale(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, rows(range(1, 31)))
    httpx.post(f"{live.url}/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-kl .main-svg").first).to_be_visible()
    # linked (the default): zoom one, all follow; double-click: all show every step again
    drag_zoom(page, "chart-reward", 0.3, 0.6)
    page.wait_for_function("() => { const a = document.getElementById('chart-reward').layout.xaxis;"
                           " const b = document.getElementById('chart-kl').layout.xaxis;"
                           " return !a.autorange && a.range[0] === b.range[0] && a.range[1] === b.range[1]; }")
    double_click_reset(page, "chart-reward")
    page.wait_for_function("() => document.getElementById('chart-kl').layout.xaxis.autorange === true")
    # unlinked: the zoom stays on its chart
    page.locator("#chart-link-x").uncheck()
    drag_zoom(page, "chart-reward", 0.3, 0.6)
    page.wait_for_function("() => document.getElementById('chart-reward').layout.xaxis.autorange === false")
    page.wait_for_timeout(300)
    assert chart(page, "kl", "el.layout.xaxis.autorange") is True

    assert chart(page, "kl", "el.layout.yaxis.type") == "linear"
    page.locator("#chart-log-kl").check()
    page.wait_for_function("() => document.getElementById('chart-kl').layout.yaxis.type === 'log'")
    assert chart(page, "grad_norm", "el.layout.yaxis.type") == "linear"
    expect(page.locator("#chart-log-loss")).to_have_count(0)  # offered for KL and grad norm only
    page.reload()
    expect(page.locator("#chart-kl .main-svg").first).to_be_visible()
    assert chart(page, "kl", "el.layout.yaxis.type") == "log"
    expect(page.locator("#chart-log-kl")).to_be_checked()
    expect(page.locator("#chart-link-x")).not_to_be_checked()


def test_a_series_hidden_from_the_legend_stays_hidden_through_a_live_merge(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, rows(range(1, 11)))
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-spread .main-svg").first).to_be_visible()
    page.locator("#chart-spread .legend .traces").first.click()  # reward_std, raw and smoothed
    hidden = ("() => document.getElementById('chart-spread').data"
              ".filter((t) => t.name === 'reward_std').map((t) => t.visible)")
    page.wait_for_function(f"() => ({hidden})().every((v) => v === 'legendonly')")
    poll = page.evaluate("document.getElementById('charts-panel').dataset.poll")
    new_metric = [{"step": 11, "metrics": {"reward": 0.1, "loss": 0.5, "completions/mean_length": 9}}]
    report(live, run_id, headers, new_metric)  # a new chart: the panel's shape changes
    expect(page.locator("#chart-length .main-svg").first).to_be_visible(timeout=15_000)
    assert page.evaluate("document.getElementById('charts-panel').dataset.poll") != poll
    assert page.evaluate(hidden) == ["legendonly", "legendonly"]
