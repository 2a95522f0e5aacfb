"""The runs list at 1440x900 (issue 34): one line per run, so 15+ runs show without scrolling,
long names cut with the full name on hover, the table inside the window; and sorting by a
column header sorts every run on the server, across pages, in both directions. Every address
the list puts in the address bar is a full page (issue 56): a filter, reloaded, gone Back to
or opened in a new tab, shows the styled list with that filter on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.listing import service as listing
from app.metrics.models import MetricRollup
from app.runs.models import Run
from tests.conftest import tiny_spec
from tests.e2e.conftest import DESK, PHONE
from tests.e2e.test_phone_and_keyboard import SMALL_TARGETS
from tests.settled import add_points
from tests.stack import Stack

COUNT = 64  # more than a page of 50: the first made is on page 2 of the default order
NAME = "dense-{:02d}-qwen2.5-0.5b-instruct-grpo-length-target-lr-3e-6-beta-0.04-generations-8"


def metric_rows(db: Session, run_id: int, reward: float, kl: float) -> None:
    """The last reward and KL the row shows (and sorts by), written straight into the store."""
    add_points(db, run_id, [("reward", 1, reward), ("kl", 1, kl)])
    db.add(MetricRollup(run_id=run_id, level=2, name="reward", bucket=0, n=1, vsum=reward,
                        vmin=reward, vmax=reward, first_step=1, last_step=1, nonfinite=0))


@pytest.fixture(scope="module")
def dense(live: Stack) -> list[int]:
    """COUNT finished runs with long names, made cheaply in the stack's database: the first
    made has the best reward and the lowest KL, the last made the worst reward and the
    highest KL."""
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            runs = [Run(name=NAME.format(i), spec=tiny_spec(name=NAME.format(i)),
                        status="succeeded", max_steps=1, current_step=1,
                        metric_names=["reward", "kl"]) for i in range(COUNT)]
            db.add_all(runs)
            db.flush()
            for i, run in enumerate(runs):
                reward = {0: 9.0, COUNT - 1: -9.0}.get(i, 0.5 + 0.001 * i)
                metric_rows(db, run.id, reward, 0.0 if i == 0 else 0.01 * (i + 1))
            db.commit()
            return [r.id for r in runs]
    finally:
        engine.dispose()



ROWS = "#runs-grid tbody tr"
FIRST_ROW = "#runs-grid tbody tr >> nth=0"


def test_fifteen_runs_show_at_1440x900_on_one_line_each(desk: Page, live: Stack,
                                                         dense: list[int]) -> None:
    page = desk
    page.goto(f"{live.url}/runs?q=dense-")
    expect(page.locator(ROWS)).to_have_count(50)
    shown = page.evaluate("""() => [...document.querySelectorAll('#runs-grid tbody tr')]
        .filter((r) => { const b = r.getBoundingClientRect();
                         return b.top >= 0 && b.bottom <= window.innerHeight; }).length""")
    assert shown >= 15, f"{shown} runs visible at 1440x900"
    heights = page.evaluate("[...document.querySelectorAll('#runs-grid tbody tr')]"
                            ".map((r) => r.getBoundingClientRect().height)")
    assert max(heights) < 40, max(heights)  # one line each (a wrapped name was 65 px)
    table = page.locator("#runs-grid").bounding_box()
    assert table["x"] + table["width"] <= DESK["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= DESK["width"]
    actions = page.locator(f"#run-row-{dense[-1]} td.actions").bounding_box()
    assert actions["x"] + actions["width"] <= DESK["width"]  # not cut off
    name = page.locator(f"#run-row-{dense[-1]} td.name a")
    expect(name).to_have_attribute("title", NAME.format(COUNT - 1))  # the full name on hover
    assert page.evaluate("(a) => a.scrollWidth > a.clientWidth", name.element_handle())
    assert page.evaluate("(a) => getComputedStyle(a).textOverflow", name.element_handle()) == (
        "ellipsis")


def sort_by(page: Page, key: str, direction: str) -> None:
    page.click(f"a.sort-col[data-sort={key}]")
    expect(page).to_have_url(f"{page.url.split('?')[0]}?q=dense-&sort={key}&dir={direction}")
    expect(page.locator(f"a.sort-col[data-sort={key}]").locator("xpath=..")).to_have_attribute(
        "aria-sort", "descending" if direction == "desc" else "ascending")


def first_row(page: Page, run_id: int) -> None:
    expect(page.locator(FIRST_ROW)).to_have_attribute("id", f"run-row-{run_id}")


def test_a_header_sorts_every_run_across_pages(desk: Page, live: Stack,
                                               dense: list[int]) -> None:
    page = desk
    page.goto(f"{live.url}/runs?q=dense-")
    first_row(page, dense[-1])  # newest first: the first made is on page 2
    assert page.locator(f"#run-row-{dense[0]}").count() == 0
    sort_by(page, "reward", "desc")
    first_row(page, dense[0])  # the best reward of all 64, from page 2
    sort_by(page, "reward", "asc")
    first_row(page, dense[-1])
    last_on_one = float(page.locator("#runs-grid tbody tr td.col-reward").last
                        .get_attribute("data-value"))
    page.click("a[rel=next]")  # the pager keeps the sort
    expect(page).to_have_url(f"{live.url}/runs?q=dense-&sort=reward&dir=asc&page=2")
    expect(page.locator(ROWS)).to_have_count(COUNT - 50)
    values = [float(v) for v in page.locator("#runs-grid tbody td.col-reward")
              .evaluate_all("(cells) => cells.map((c) => c.dataset.value)")]
    assert values == sorted(values) and values[0] >= last_on_one and values[-1] == 9.0
    sort_by(page, "kl", "desc")  # a new sort starts at page 1
    first_row(page, dense[-1])
    sort_by(page, "kl", "asc")
    first_row(page, dense[0])
    sort_by(page, "name", "asc")
    first_row(page, dense[0])  # dense-00, the first made
    sort_by(page, "name", "desc")
    first_row(page, dense[-1])
    expect(page.locator('#run-filters select[name="sort"]')).to_have_value("name")
    expect(page.locator('#run-filters select[name="dir"]')).to_have_value("desc")


TAG = "histprobe"
TAGGED = range(0, COUNT, 13)  # 5 of the dense runs


@pytest.fixture(scope="module")
def tagged(live: Stack, dense: list[int]) -> list[int]:
    """Five of the dense runs carry TAG (a tag no other test uses)."""
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            for i in TAGGED:
                listing.set_tags(db, db.get(Run, dense[i]), [TAG])
            db.commit()
    finally:
        engine.dispose()
    return [dense[i] for i in TAGGED]


def full_list(page: Page, rows: int, q: str, tag: str) -> None:
    """The whole styled runs page (not the table fragment alone), showing ``rows`` runs, with
    the filter form holding ``q`` and ``tag``."""
    expect(page.locator("header.topbar")).to_be_visible()
    expect(page.locator("h1")).to_have_text("Runs")
    expect(page.locator(ROWS)).to_have_count(rows)
    expect(page.locator("#run-filters")).to_have_css("display", "flex")  # runs_list.css applied
    expect(page.locator("#run-filters input[name=q]")).to_have_value(q)
    expect(page.locator("#run-filters select[name=tag]")).to_have_value(tag)


def test_a_filtered_list_is_a_full_page_after_reload_back_and_in_a_new_tab(
        desk: Page, browser: Browser, live: Stack, tagged: list[int], tmp_path: Path) -> None:
    page = desk
    page.goto(f"{live.url}/runs")
    full_list(page, 50, "", "")
    page.fill("#run-filters input[name=q]", "dense-")
    page.select_option("#run-filters select[name=tag]", TAG)
    filtered = f"{live.url}/runs?q=dense-&tag={TAG}"
    expect(page).to_have_url(filtered)
    expect(page.locator(ROWS)).to_have_count(len(tagged))
    page.reload()
    full_list(page, len(tagged), "dense-", TAG)
    page.screenshot(path=os.environ.get("GRPODECK_SHOT_FILTER",
                                        str(tmp_path / "runs-list-filter-reload.png")))
    page.go_back()
    expect(page).to_have_url(f"{live.url}/runs")
    full_list(page, 50, "", "")
    page.go_forward()
    expect(page).to_have_url(filtered)
    full_list(page, len(tagged), "dense-", TAG)
    context = browser.new_context(viewport=DESK)  # a shared link or a bookmark
    try:
        other = context.new_page()
        other.goto(filtered)
        full_list(other, len(tagged), "dense-", TAG)
        assert sorted(int(r.split("-")[-1]) for r in other.locator(ROWS).evaluate_all(
            "(rows) => rows.map((r) => r.id)")) == tagged
    finally:
        context.close()


# Runs wholly on screen; scrolled: once the list is scrolled to its first run (a screenful).
ON_SCREEN = """(scrolled) => { const rows = [...document.querySelectorAll('#runs-grid tbody tr')];
  if (scrolled) window.scrollTo(0, rows[0].getBoundingClientRect().top + window.scrollY);
  return rows.filter((r) => { const b = r.getBoundingClientRect();
    return b.top >= 0 && b.bottom <= window.innerHeight; }).length; }"""


@pytest.fixture(scope="module")
def noted(live: Stack, dense: list[int]) -> int:
    """The second newest dense run with three tags and a long note (what makes a card grow)."""
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            run = db.get(Run, dense[-2])
            listing.set_tags(db, run, ["phone-a", "phone-baseline", "phone-lr-sweep"])
            listing.set_note(run, "a long note about this run " * 8)
            db.commit()
    finally:
        engine.dispose()
    return dense[-2]


def test_five_runs_fit_a_phone_screen(browser: Browser, live: Stack, dense: list[int],
                                      noted: int, tmp_path: Path) -> None:
    """Issue 56: at 390x844 each run was a card of 16 labelled lines, 1.4 runs a screen. A
    card now shows what tells runs apart (name, status, health, progress, reward, tags and the
    actions) in a few lines; the model, created time and other numbers are on the run page."""
    context = browser.new_context(viewport=PHONE, has_touch=True)
    try:
        page = context.new_page()
        page.goto(f"{live.url}/runs?q=dense-")
        expect(page.locator(ROWS)).to_have_count(50)
        page.wait_for_load_state("networkidle")  # runs_list.js has folded the filters
        first_view = page.evaluate(ON_SCREEN, False)  # under the bars, title, folded filters
        page.screenshot(path=os.environ.get("GRPODECK_SHOT_PHONE",
                                            str(tmp_path / "runs-list-phone.png")))
        screenful = page.evaluate(ON_SCREEN, True)
        heights = page.evaluate("[...document.querySelectorAll('#runs-grid tbody tr')]"
                                ".map((r) => r.getBoundingClientRect().height)")
        assert screenful >= 5, (f"{screenful} runs a 390x844 screen ({first_view} on the first "
                                f"view), cards {max(heights):.0f} px high")
        assert first_view >= 3, first_view
        assert max(heights) <= PHONE["height"] / 6, heights  # tags and a long note too
        expect(page.locator(f"#run-row-{noted} .tag")).to_have_count(3)
        row = page.locator(f"#run-row-{dense[-1]}")
        for cell in ("td.name a", ".status", ".verdict", ".bar", "td.col-reward", "td.actions"):
            expect(row.locator(cell).first).to_be_visible()
        expect(row.locator("td.col-reward")).to_contain_text("-9")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
        assert page.evaluate(SMALL_TARGETS) == []
        row.locator(".annotate summary").click()  # the tags and note editor opens in full
        expect(row.locator("textarea[name=note]")).to_be_visible()
        box = row.locator("textarea[name=note]").bounding_box()
        assert box["width"] > PHONE["width"] / 2 and box["x"] + box["width"] <= PHONE["width"]
    finally:
        context.close()
