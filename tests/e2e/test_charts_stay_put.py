"""A run page left open while a run streams: no chart element is ever replaced (points are
appended, shape changes merged chart by chart), the reader's zoom survives every poll, and a
finding the reader collapsed stays collapsed across the findings panel's refreshes."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, Response, expect
from sqlalchemy.orm import sessionmaker

from app.core.db import make_engine
from app.diagnostics.model import Finding
from tests.app.test_live_chart_marks import diagnose
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack

# Counts every removal of a chart element (or of a box holding one) anywhere on the page; plotly's
# own redraws inside a chart remove only its SVG children and are not counted.
WATCH_REPLACEMENTS = """() => {
  window.chartRemovals = 0;
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.removedNodes) {
      if (n.nodeType === 1 && (n.matches('.chart, .chart-box') || n.querySelector('.chart')))
        window.chartRemovals += 1;
    }
  }).observe(document.body, { childList: true, subtree: true });
  document.querySelectorAll('#charts-panel .chart').forEach((el) => { el.dataset.original = '1'; });
}"""

COUNT_SWAPS = ("window.findingSwaps = 0; document.body.addEventListener('htmx:afterSwap',"
               " (e) => { if (e.detail.target.id === 'findings-panel') window.findingSwaps += 1; })")
X_RANGE = "(id) => document.getElementById(id).layout.xaxis.range.slice()"


def report(live: Stack, run_id: int, headers: dict[str, str], rows: list[dict]) -> None:
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text


def row(step: int, **extra: float | str) -> dict:
    return {"step": step, "metrics": {"reward": 0.1 * step, "loss": 0.01 * step, **extra}}


def drag_zoom(page: Page, chart: str, start: float, end: float) -> None:
    """Zoom as a reader does: drag across the plot area (a GUI edit, which uirevision keeps)."""
    box = page.locator(f"#{chart} .nsewdrag").first.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * (start + end) / 2, y, steps=4)
    page.mouse.move(box["x"] + box["width"] * end, y, steps=4)
    page.mouse.up()


def watched_run(page: Page, live: Stack) -> tuple[int, dict[str, str], list[str]]:
    """A live run with 20 steps, its page open and every chart element watched: (id, the
    worker's headers, the page's script errors as they come)."""
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, [row(s) for s in range(1, 21)])
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-loss .main-svg").first).to_be_visible()
    page.evaluate(WATCH_REPLACEMENTS)
    return run_id, headers, errors


def test_no_chart_is_replaced_and_zoom_is_kept_while_findings_change(page: Page, live: Stack) -> None:
    run_id, headers, errors = watched_run(page, live)
    first_poll = page.evaluate("document.getElementById('charts-panel').dataset.poll")

    drag_zoom(page, "chart-reward", 0.2, 0.6)
    page.wait_for_function("() => document.getElementById('chart-reward').layout.xaxis.autorange === false")
    zoom = page.evaluate(X_RANGE, "chart-reward")
    assert 4 < zoom[0] < zoom[1] < 15
    page.wait_for_function(f"() => {{ const r = document.getElementById('chart-loss').layout.xaxis.range;"
                           f" return r[0] === {zoom[0]} && r[1] === {zoom[1]}; }}")  # linked charts follow

    # points only: appended to the drawn traces
    report(live, run_id, headers, [row(s) for s in range(21, 26)])
    page.wait_for_function("() => document.getElementById('chart-reward').data[0].x.length === 25")
    # a NaN loss: the NaN/inf marker and note arrive, then a critical finding opens (after it has
    # held for a few evaluations) and shades the loss chart; a new metric adds a chart
    report(live, run_id, headers, [row(26, loss="nan")])
    expect(page.locator("#nonfinite-loss")).to_contain_text("NaN at step 26", timeout=15_000)
    for step in range(27, 40):
        report(live, run_id, headers, [row(step, entropy=1.0)])
    expect(page.locator("#chart-entropy .main-svg").first).to_be_visible(timeout=15_000)
    expect(page.locator("#findings-panel details.finding.sev-critical")).to_have_count(1, timeout=15_000)
    page.wait_for_function("() => (document.getElementById('chart-loss').layout.shapes || []).length > 0",
                           timeout=15_000)
    page.wait_for_function("() => document.getElementById('chart-reward').data[0].x.length === 39",
                           timeout=15_000)
    assert page.evaluate("document.getElementById('charts-panel').dataset.poll") != first_poll

    # the run ends: the last merge turns polling off, still in place
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/finished", json={"returncode": 0},
                       headers=headers)
    assert reply.status_code == 200, reply.text
    page.wait_for_function("() => document.getElementById('charts-panel').dataset.live === '0'",
                           timeout=15_000)

    assert page.evaluate("window.chartRemovals") == 0
    assert page.evaluate("[...document.querySelectorAll('#charts-panel .chart')]"
                         ".filter((el) => el.id !== 'chart-entropy')"
                         ".every((el) => el.dataset.original === '1')")
    assert page.evaluate(X_RANGE, "chart-reward") == zoom
    assert page.evaluate(X_RANGE, "chart-loss") == zoom
    assert page.evaluate(X_RANGE, "chart-entropy") == zoom  # a new chart joins the shared zoom
    assert errors == []


def test_a_finding_shades_and_unshades_its_chart_with_only_the_marks_sent(
        page: Page, live: Stack) -> None:
    """No point is re-read for a finding: the poll answers its marks alone (a few hundred bytes)
    and the page lays them over the drawn chart, keeping its element, its points and the zoom."""
    run_id, _, errors = watched_run(page, live)
    drag_zoom(page, "chart-reward", 0.2, 0.6)
    page.wait_for_function("() => document.getElementById('chart-reward').layout.xaxis.autorange === false")
    zoom = page.evaluate(X_RANGE, "chart-reward")
    engine = make_engine(live.database_url)

    def charts_answer(r: Response) -> bool:
        return "/_charts?" in r.url and r.status == 200

    try:
        sessions = sessionmaker(engine)
        loss_blowup = Finding(category="numerical_instability", severity="critical", first_step=5,
                              last_step=12, summary="loss spikes", metric="loss")
        with page.expect_response(charts_answer, timeout=15_000) as answer:
            diagnose(run_id, [loss_blowup], sessions)
        assert 'data-marks-only="1"' in answer.value.text()
        page.wait_for_function(
            "() => (document.getElementById('chart-loss').layout.shapes || []).length === 1",
            timeout=15_000)
        assert page.evaluate("document.getElementById('chart-loss').layout.annotations"
                             ".map((a) => a.text)") == ["numerical_instability"]
        with page.expect_response(charts_answer, timeout=15_000) as answer:
            diagnose(run_id, [], sessions)  # resolved: the shade goes
        assert 'data-marks-only="1"' in answer.value.text()
        page.wait_for_function(
            "() => (document.getElementById('chart-loss').layout.shapes || []).length === 0",
            timeout=15_000)
    finally:
        engine.dispose()
    assert page.evaluate("window.chartRemovals") == 0
    assert page.evaluate("[...document.querySelectorAll('#charts-panel .chart')]"
                         ".every((el) => el.dataset.original === '1')")
    assert page.evaluate("document.getElementById('chart-reward').data[0].x.length") == 20
    assert page.evaluate(X_RANGE, "chart-reward") == zoom
    assert page.evaluate(X_RANGE, "chart-loss") == zoom
    assert errors == []


def test_a_finding_stays_open_or_collapsed_across_refreshes(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, [row(s) for s in range(1, 6)])
    page.goto(f"{live.url}/runs/{run_id}")
    report(live, run_id, headers, [row(6, loss="nan")])
    for step in range(7, 16):
        report(live, run_id, headers, [row(step)])
    critical = page.locator("#findings-panel details.finding.sev-critical")
    expect(critical).to_have_count(1, timeout=15_000)
    expect(critical).not_to_have_attribute("open", "")  # one line until the reader opens it
    page.evaluate(COUNT_SWAPS)
    critical.locator("summary").first.click()
    expect(critical).to_have_attribute("open", "")
    page.wait_for_function("() => window.findingSwaps >= 3", timeout=15_000)
    expect(critical).to_have_attribute("open", "")
    page.reload()  # a reload of the tab remembers it too
    expect(critical).to_have_count(1)
    expect(critical).to_have_attribute("open", "")
    critical.locator("summary").first.click()
    page.evaluate(COUNT_SWAPS)
    page.wait_for_function("() => window.findingSwaps >= 2", timeout=15_000)
    expect(critical).not_to_have_attribute("open", "")


def test_charts_appear_in_place_when_the_first_steps_arrive(page: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live)
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#charts-panel .empty")).to_contain_text("Waiting for the first logged step")
    expect(page.locator("#chart-tools")).to_be_hidden()
    page.evaluate(WATCH_REPLACEMENTS)
    report(live, run_id, headers, [row(s) for s in range(1, 4)])
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible(timeout=15_000)
    expect(page.locator("#charts-panel .empty")).to_have_count(0)
    expect(page.locator("#chart-tools")).to_be_visible()
    report(live, run_id, headers, [row(s) for s in range(4, 7)])
    page.wait_for_function("() => document.getElementById('chart-reward').data[0].x.length === 6",
                           timeout=15_000)
    assert page.evaluate("window.chartRemovals") == 0


def test_charts_do_not_shift_for_a_reader_scrolled_to_them(page: Page, live: Stack) -> None:
    """Cumulative layout shift while findings open above the charts: the browser's scroll
    anchoring keeps a reader's charts still, as long as the charts are not swapped out."""
    run_id, headers = reporting_run(live)
    report(live, run_id, headers, [row(s, kl=0.01 * s) for s in range(1, 21)])
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-kl .main-svg").first).to_be_visible()
    page.evaluate("window.scrollTo(0, document.getElementById('charts-panel').offsetTop)")
    page.evaluate("""() => { window.shift = 0; new PerformanceObserver((list) => {
        for (const e of list.getEntries()) if (!e.hadRecentInput) window.shift += e.value;
      }).observe({ type: 'layout-shift' }); }""")
    report(live, run_id, headers, [row(21, loss="nan")])
    for step in range(22, 34):
        report(live, run_id, headers, [row(step, kl="inf" if step == 28 else 0.01 * step)])
        page.wait_for_timeout(300)
    expect(page.locator("#findings-panel details.finding.sev-critical")).to_have_count(1, timeout=15_000)
    expect(page.locator("#nonfinite-kl")).to_be_visible(timeout=15_000)
    page.wait_for_timeout(1500)
    assert page.evaluate("window.shift") < 0.01
