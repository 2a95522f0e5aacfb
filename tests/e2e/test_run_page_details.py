"""Run page details in a real browser (issue 56): the system charts' heading is a section heading
above them, not a line inside the CPU card; the artifact and alert delivery tables pad their
cells."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.alerts.helpers import zero_spread
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


PADDING = ("(cell) => { const s = getComputedStyle(cell); return [s.paddingTop, s.paddingRight,"
           " s.paddingBottom, s.paddingLeft].map(parseFloat); }")


def cell_padding(page: Page, table: str) -> list[list[float]]:
    """[top, right, bottom, left] padding (px) of every header and data cell of ``table``."""
    cells = page.locator(f"{table} th, {table} td")
    assert cells.count() >= 2, table
    return [cells.nth(i).evaluate(PADDING) for i in range(cells.count())]


def padded(paddings: list[list[float]], reference: list[float]) -> bool:
    """Every cell padded as ``reference``, on each side."""
    return all(p == reference for p in paddings)


def test_artifact_and_delivery_tables_pad_their_cells_as_the_other_tables_do(
        desk: Page, live: Stack) -> None:
    """Issue 56 (7c): the artifacts table and the alert deliveries table had cells with no
    padding (their text ran together); they are padded as the run and compare pages' other
    tables (the compare page's config differences) are."""
    run_id, headers = reporting_run(live, name="padded-tables")
    other, _ = reporting_run(live, name="padded-other", learning_rate=3e-5)
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/artifacts",
                       params={"name": "notes.txt", "kind": "file", "step": 3},
                       content=b"hello", headers=headers, timeout=30)
    assert reply.status_code == 201, reply.text
    desk.goto(f"{live.url}/runs/compare?ids={run_id},{other}")
    reference = cell_padding(desk, "#spec-diff")[0]
    assert min(reference) >= 4, reference
    desk.goto(f"{live.url}/runs/{run_id}/artifacts")
    assert padded(cell_padding(desk, "#artifacts"), reference)
    desk.goto(f"{live.url}/settings/alerts")
    desk.fill("#f-urls", "json://hooks.example.com/deck")
    desk.click("#save-destinations")
    desk.click("#send-test")
    expect(desk.locator("#test-deliveries tr.test-delivery")).to_have_count(1)
    assert padded(cell_padding(desk, "#test-deliveries table"), reference)
    alerting, headers = reporting_run(live, name="padded-alert")  # an alert, sent to that one
    rows = zero_spread(range(1, 61))
    for start in range(0, 60, 10):  # batch by batch, as a run reports: the finding confirms
        post_rows(live, alerting, headers, rows[start:start + 10])
    desk.goto(f"{live.url}/alerts?run={alerting}")
    desk.click(".alert-item details.deliveries summary")
    expect(desk.locator(".alert-item details.deliveries tr.delivery-pending")).to_have_count(1)
    assert padded(cell_padding(desk, ".alert-item details.deliveries table"), reference)


def test_an_artifact_is_deleted_from_its_tab_after_a_confirm(desk: Page, live: Stack) -> None:
    """Issue 56 (7d): the Artifacts tab's Delete button asks first (a dismissed confirm deletes
    nothing), then deletes through htmx: the row leaves the table, the file the server. The
    permissions: tests/app/test_artifact_delete_button.py."""
    run_id, headers = reporting_run(live, name="deleting-artifacts")
    ids = []
    for name in ("keep.bin", "drop.bin"):
        reply = httpx.post(f"{live.url}/api/runs/{run_id}/artifacts",
                           params={"name": name}, content=name.encode(), headers=headers)
        assert reply.status_code == 201, reply.text
        ids.append(reply.json()["id"])
    desk.goto(f"{live.url}/runs/{run_id}/artifacts")
    asked: list[str] = []
    desk.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    desk.click(f"#delete-artifact-{ids[1]}")
    expect(desk.locator("#artifacts tbody tr")).to_have_count(2)
    assert asked and "drop.bin" in asked[0]
    desk.evaluate("window.__sameDocument = true")
    desk.once("dialog", lambda d: d.accept())
    desk.click(f"#delete-artifact-{ids[1]}")
    expect(desk.locator("#artifacts tbody tr")).to_have_count(1)
    expect(desk.locator(f"#artifacts tr[data-artifact='{ids[0]}']")).to_be_visible()
    assert desk.evaluate("window.__sameDocument") is True  # htmx swapped the table, no reload
    listed = httpx.get(f"{live.url}/api/runs/{run_id}/artifacts").json()
    assert [a["name"] for a in listed] == ["keep.bin"]
    gone = httpx.get(f"{live.url}/api/runs/{run_id}/artifacts/{ids[1]}/file")
    assert gone.status_code == 404


TICKS = "(id) => document.getElementById(id)._fullLayout.xaxis._vals.map((t) => t.x)"


def test_step_axes_tick_on_whole_steps(desk: Page, live: Stack) -> None:
    """Issue 56 (8b): a run's first steps ticked at 1.2, 1.4 ... on the run page and the compare
    page; steps are whole, so the step axis ticks on whole steps, also zoomed in, and still
    chooses its own spacing over a long range."""
    run_id, headers = reporting_run(live, name="few-steps")
    other, other_headers = reporting_run(live, name="few-steps-too")
    for rid, hdr in ((run_id, headers), (other, other_headers)):
        post_rows(live, rid, hdr, [{"step": s, "metrics": {"reward": 0.1 * s, "loss": 1.0}}
                                   for s in (1, 2, 3)])
    desk.goto(f"{live.url}/runs/{run_id}")
    expect(desk.locator("#chart-reward .main-svg").first).to_be_visible()
    desk.wait_for_function("() => document.getElementById('chart-reward')._fullLayout"
                           ".xaxis._vals.length > 1")
    ticks = desk.evaluate(TICKS, "chart-reward")
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    desk.goto(f"{live.url}/runs/compare?ids={run_id},{other}")
    expect(desk.locator("#compare-1 .main-svg").first).to_be_visible()
    ticks = desk.evaluate(TICKS, "compare-1")
    assert ticks and all(float(t).is_integer() for t in ticks), ticks

    long_run, headers = reporting_run(live, name="many-steps")
    post_rows(live, long_run, headers, [{"step": s, "metrics": {"reward": 0.1, "loss": 1.0}}
                                        for s in range(1, 201)])
    desk.goto(f"{live.url}/runs/{long_run}")
    expect(desk.locator("#chart-loss .main-svg").first).to_be_visible()
    spacing = "(id) => document.getElementById(id)._fullLayout.xaxis.dtick"
    assert desk.evaluate(spacing, "chart-loss") >= 20  # plotly's own spacing
    desk.evaluate("Plotly.relayout('chart-loss', {'xaxis.range': [100.2, 102.8]})")
    desk.wait_for_function(f"() => ({TICKS})('chart-loss').every(Number.isInteger)"
                           " && document.getElementById('chart-loss')._fullLayout.xaxis.range[0]"
                           " === 100.2")
    assert desk.evaluate(TICKS, "chart-loss") == [101, 102]  # zoomed in: every step
    desk.evaluate("Plotly.relayout('chart-loss', {'xaxis.autorange': true})")
    desk.wait_for_function(f"() => ({spacing})('chart-loss') >= 20")  # wide again: its own
