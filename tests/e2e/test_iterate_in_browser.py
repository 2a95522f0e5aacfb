"""The iterate loop in a real browser (Debian chromium): pick three runs on /runs, open the
compare page (overlaid traces, the spec differences), a comparison that refreshes while a run
streams (new points, the reader's zoom and hidden traces kept), delete a run from the list after
a confirmation, and the runs list as cards on a 390 px phone."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.e2e.test_charts_stay_put import drag_zoom
from tests.stack import Stack


def reporting_run(live: Stack, steps: int, **spec: Any) -> int:
    """A claimed run (as a worker sees it) that has reported ``steps`` steps of reward and kl,
    then finished."""
    run_id, headers = streaming_run(live, range(1, steps + 1), **spec)
    done = httpx.post(f"{live.url}/api/runs/{run_id}/finished", headers=headers,
                      json={"returncode": 0})
    assert done.status_code == 200, done.text
    return run_id


def report(live: Stack, run_id: int, headers: dict[str, str], steps: range, lr: float) -> None:
    rows = [{"step": s, "metrics": {"reward": s * lr * 1e4, "kl": 0.01 * s}} for s in steps]
    assert httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                      headers=headers).status_code == 200


def streaming_run(live: Stack, steps: range, **spec: Any) -> tuple[int, dict[str, str]]:
    """A claimed, still running run that has reported ``steps``: (id, the worker's headers)."""
    engine = make_engine(live.database_url)
    with Session(engine) as db:
        run, ticket = service.create_run(db, spec=RunSpec(model="builtin:tiny-random", **spec))
        db.commit()
        run_id = run.id
    engine.dispose()
    claim = httpx.post(f"{live.url}/api/runs/{run_id}/claim", json={},
                       headers={"Authorization": f"Bearer {ticket}"})
    assert claim.status_code == 200, claim.text
    headers = {"Authorization": f"Bearer {claim.json()['token']}"}
    report(live, run_id, headers, steps, spec.get("learning_rate", 1e-5))
    return run_id, headers


def test_compare_three_runs_from_the_list(page: Page, live: Stack) -> None:
    ids = [reporting_run(live, 12, name=f"cmp-{i}", learning_rate=lr)
           for i, lr in enumerate((1e-5, 2e-5, 4e-5))]
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/runs?q=cmp-")
    for run_id in ids:
        page.check(f'#run-row-{run_id} input[name="ids"]')
    page.click("#compare-button")
    shown = ids[::-1]  # in the list's order, newest first
    expect(page).to_have_url(f"{live.url}/runs/compare?ids={shown[0]}%2C{shown[1]}%2C{shown[2]}")
    reward = page.locator('#compare-charts .chart[data-metric="reward"]')
    expect(reward.locator(".scatterlayer .trace")).to_have_count(3)  # three lines drawn
    expect(reward.locator(".legendtext")).to_have_text([f"#{i} cmp-{ids.index(i)}" for i in
                                                        shown])
    drawn = page.evaluate("document.querySelector('.chart[data-metric=reward]').data"
                          ".map(t => t.y[11])")
    assert [round(v, 6) for v in drawn] == [4.8, 2.4, 1.2]
    diff = page.locator("#spec-diff tbody tr", has_text="learning_rate")
    expect(diff.locator("td")).to_have_text(["4e-05", "2e-05", "1e-05"])
    expect(diff.locator("td.differs")).to_have_count(2)
    assert errors == []


REWARD = "document.querySelector('#compare-charts .chart[data-metric=reward]')"


def test_live_compare_gains_points_and_keeps_the_zoom(page: Page, live: Stack) -> None:
    """A run streams while its comparison is open: the page's poll brings its new points into
    the same chart element, and the zoom and the legend entry the reader hid before it stay."""
    streaming, headers = streaming_run(live, range(1, 21), name="cmp-live")
    ended = reporting_run(live, 20, name="cmp-ended", learning_rate=2e-5)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/runs/compare?ids={streaming},{ended}&metrics=reward")
    chart = page.locator('#compare-charts .chart[data-metric="reward"]')
    expect(chart.locator(".scatterlayer .trace")).to_have_count(2)
    expect(page.locator("#compare-runs")).to_have_attribute("hx-trigger", "every 5s")
    page.evaluate(f"{REWARD}.dataset.original = '1'")
    drag_zoom(page, "compare-1", 0.2, 0.6)
    page.wait_for_function(f"() => {REWARD}.layout.xaxis.autorange === false")
    zoom = page.evaluate(f"{REWARD}.layout.xaxis.range.slice()")
    assert 2 < zoom[0] < zoom[1] < 15, zoom
    chart.locator(".legend .traces").nth(1).click()  # hide the ended run (on every chart)
    page.wait_for_function(f"() => {REWARD}.data[1].visible === false")

    report(live, streaming, headers, range(21, 31), 1e-5)
    page.wait_for_function(f"() => {{ const el = {REWARD}; return el && el.data"
                           " && el.data[0].x.length === 30; }", timeout=15_000)
    assert page.evaluate(f"{REWARD}.data[0].x.slice(-2)") == [29, 30]
    expect(page.locator(f"#compare-run-{streaming}")).to_contain_text("step 30")
    assert page.evaluate(f"{REWARD}.layout.xaxis.range.slice()") == zoom
    assert page.evaluate(f"{REWARD}.layout.xaxis.autorange") is False
    assert page.evaluate(f"{REWARD}.data[1].visible") is False
    assert page.evaluate(f"{REWARD}.dataset.original") == "1"  # redrawn in place, not replaced

    done = httpx.post(f"{live.url}/api/runs/{streaming}/finished", headers=headers,
                      json={"returncode": 0})
    assert done.status_code == 200, done.text
    expect(page.locator("#compare-runs")).to_have_attribute("data-live", "0", timeout=15_000)
    expect(page.locator("#compare-runs")).not_to_have_attribute("hx-trigger", re.compile(".*"))
    assert page.evaluate(f"{REWARD}.layout.xaxis.range.slice()") == zoom
    assert errors == []


def test_delete_from_the_list_asks_first(page: Page, live: Stack) -> None:
    run_id = reporting_run(live, 2, name="doomed-run")
    page.goto(f"{live.url}/runs?q=doomed-run")
    row = page.locator(f"#run-row-{run_id}")
    page.once("dialog", lambda d: d.dismiss())
    row.locator("button", has_text="delete").click()
    page.wait_for_timeout(300)
    expect(row).to_be_visible()
    page.once("dialog", lambda d: d.accept())
    row.locator("button", has_text="delete").click()
    expect(page.locator("#list-flash")).to_have_text(f"run {run_id} deleted")
    expect(row).to_have_count(0)
    assert httpx.get(f"{live.url}/api/runs/{run_id}").status_code == 404


def test_runs_list_is_cards_on_a_phone(page: Page, live: Stack) -> None:
    run_id = reporting_run(live, 2, name="a-rather-long-run-name-that-must-wrap-on-a-phone")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live.url}/runs")
    row = page.locator(f"#run-row-{run_id}")
    expect(row).to_be_visible()
    # a card (a grid of its lines, issue 56), not a table row
    assert row.evaluate("el => getComputedStyle(el).display") != "table-row"
    assert page.locator(".runs-list thead").evaluate("el => el.offsetHeight") <= 1
    widths = page.evaluate("""() => ({
        table: document.querySelector('#runs-table').scrollWidth,
        filters: document.querySelector('#run-filters').scrollWidth,
        main: document.querySelector('main').clientWidth})""")
    assert widths["table"] <= widths["main"] and widths["filters"] <= widths["main"], widths
    box = row.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390


def test_dry_run_from_the_form_then_a_smoke_test(page: Page, live: Stack) -> None:
    """Idea to verdict without leaving the browser: a constant reward's dry run says it gives
    no variation (the page polls until the worker answers), then a smoke test is one click."""
    page.goto(f"{live.url}/runs/new")
    page.fill("#f-name", "dry-in-browser")
    page.fill("#f-model", "builtin:tiny-random")
    page.click("#generation > summary")  # a folded section (issue 56)
    page.fill("#f-max_completion_length", "8")
    page.select_option("#f-reward_0_name", "constant")
    page.fill('input[name="reward_0_params"]', "value=1")
    page.click("#dry-run")
    expect(page).to_have_url(re.compile(r"/dry-runs/\d+$"))
    verdict = page.locator("#dry-run-verdict")
    expect(verdict).to_contain_text("this reward gives no variation", timeout=180_000)
    expect(page.locator("#dry-run-spread")).to_contain_text("Groups with zero spread: 100%")
    expect(page.locator('#group-size-advice tr[data-g="16"]')).to_contain_text("100.0%")
    expect(page.locator("#dry-run-rewards tr[data-reward=constant]")).to_be_visible()
    page.fill('input[name="smoke_steps"]', "2")
    page.click("#smoke-button")
    expect(page).to_have_url(re.compile(r"/runs/\d+$"))
    expect(page.locator("#smoke-panel")).to_contain_text("2 of 20 steps")
    expect(page.locator("#launch-full")).to_be_visible()


def test_live_refresh_keeps_what_the_user_ticked(page: Page, live: Stack) -> None:
    """The list polls while a run is live; a refresh must not untick runs picked for compare."""
    done = reporting_run(live, 2, name="tick-me")
    engine = make_engine(live.database_url)
    with Session(engine) as db:  # a queued run keeps the list polling
        service.create_run(db, spec=RunSpec(name="tick-live", model="builtin:tiny-random",
                                            max_steps=1))
        db.commit()
    engine.dispose()
    page.goto(f"{live.url}/runs?q=tick-")
    page.check(f'#run-row-{done} input[name="ids"]')
    page.wait_for_timeout(4_000)  # longer than one refresh (3 s)
    expect(page.locator(f'#run-row-{done} input[name="ids"]')).to_be_checked()
