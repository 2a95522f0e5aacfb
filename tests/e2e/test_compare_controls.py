"""The compare page's chart controls in a browser: per-chart smoothing and log y, the x axis as
step / time since start / % of run, and hiding a run (static/compare.js)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.ingest import pipeline
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.e2e.test_pages_in_browser import serious_violations
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack

# (name, steps logged, planned steps, seconds the run took)
RUNS = (("calm", 100, 200, 500.0), ("spiky", 50, 50, 100.0))


def value(name: str, step: int, metric: str) -> float:
    if metric == "kl":
        return 50.0 if name == "spiky" and step == 25 else 0.01 + 0.001 * step
    return 0.1 + 0.2 * ((step * 7) % 5) + 0.001 * step


def stored_run(live: Stack, name: str, steps: int, planned: int, seconds: float) -> int:
    """A finished run reported through the real ingest path, with a known start and end."""
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            run, _ = service.create_run(db, spec=RunSpec(name=name, max_steps=planned))
            db.commit()
            run_id = run.id
        with Session(engine) as db:
            run = service.get_run_for_update(db, run_id)
            pipeline.receive(db, run, [(s, {m: value(name, s, m) for m in ("reward", "kl")})
                                       for s in range(1, steps + 1)])
            start = datetime(2026, 1, 1, tzinfo=UTC)
            run.started_at, run.finished_at = start, start + timedelta(seconds=seconds)
            run.status = "succeeded"
            db.commit()
    finally:
        engine.dispose()
    return run_id


@pytest.fixture(scope="module")
def ids(live: Stack) -> dict[str, int]:
    return {name: stored_run(live, name, *rest) for name, *rest in RUNS}


def ema(values: list[float], w: float) -> list[float]:
    """TensorBoard's debiased EMA, clamped to the values seen (static/chartkit.js)."""
    out, last, lo, hi = [], 0.0, float("inf"), float("-inf")
    for n, v in enumerate(values, start=1):
        last = last * w + (1 - w) * v
        lo, hi = min(lo, v), max(hi, v)
        out.append(min(hi, max(lo, last / (1 - w ** n))))
    return out


TRACES = "(id) => document.getElementById(id).data.map((t) => ({meta: String(t.meta), x: t.x, y: t.y, visible: t.visible}))"
LAYOUT = "(id) => ({y: document.getElementById(id).layout.yaxis.type, x: document.getElementById(id).layout.xaxis.title.text})"


def open_compare(page: Page, live: Stack, ids: dict[str, int]) -> None:
    page.goto(f"{live.url}/runs/compare?ids={ids['calm']},{ids['spiky']}")
    expect(page.locator("#compare-1 .main-svg").first).to_be_visible()
    expect(page.locator("#compare-1")).to_have_attribute("data-metric", "reward")
    expect(page.locator("#compare-2")).to_have_attribute("data-metric", "kl")


def slide(page: Page, selector: str, value: float) -> None:
    page.eval_on_selector(selector, "(el, v) => { el.value = String(v);"
                          " el.dispatchEvent(new Event('input', {bubbles: true})); }", value)


def line(traces: list[dict], run_id: int, kind: str = "") -> dict:
    return next(t for t in traces if t["meta"] == f"{kind}{run_id}")


def test_smoothing_is_per_chart(page: Page, live: Stack, ids: dict[str, int]) -> None:
    open_compare(page, live, ids)
    slide(page, "#compare-smoothing-1", 0.9)
    page.wait_for_function("() => document.getElementById('compare-1').data.some((t) => String(t.meta).startsWith('smoothed-'))")
    reward = page.evaluate(TRACES, "compare-1")
    for name, steps, *_ in RUNS:
        stored = [value(name, s, "reward") for s in range(1, steps + 1)]
        assert line(reward, ids[name])["y"] == stored  # the raw line stays (faint)
        smoothed = line(reward, ids[name], "smoothed-")["y"]
        assert smoothed == pytest.approx(ema(stored, 0.9), rel=1e-12)
    expect(page.locator("#compare-box-1 output")).to_have_text("0.9")
    assert not [t for t in page.evaluate(TRACES, "compare-2") if t["meta"].startswith("smoothed")]


def test_log_y_is_per_chart(page: Page, live: Stack, ids: dict[str, int]) -> None:
    open_compare(page, live, ids)
    page.check("#compare-log-2")
    page.wait_for_function("() => document.getElementById('compare-2').layout.yaxis.type === 'log'")
    assert page.evaluate(LAYOUT, "compare-1")["y"] == "linear"
    page.uncheck("#compare-log-2")
    page.wait_for_function("() => document.getElementById('compare-2').layout.yaxis.type === 'linear'")


def test_x_axis_as_step_time_or_percent_of_run(page: Page, live: Stack,
                                                ids: dict[str, int]) -> None:
    open_compare(page, live, ids)
    page.select_option("#compare-x", "percent")
    page.wait_for_function("() => document.getElementById('compare-1').layout.xaxis.title.text.startsWith('%')")
    for chart in ("compare-1", "compare-2"):
        traces = page.evaluate(TRACES, chart)
        for name, steps, planned, _ in RUNS:
            assert line(traces, ids[name])["x"] == pytest.approx(
                [100 * s / planned for s in range(1, steps + 1)])
    page.select_option("#compare-x", "time")
    page.wait_for_function("() => document.getElementById('compare-1').layout.xaxis.title.text.startsWith('time')")
    traces = page.evaluate(TRACES, "compare-1")
    for name, steps, _, seconds in RUNS:  # the run's mean step time: seconds / steps
        assert line(traces, ids[name])["x"] == pytest.approx(
            [s * seconds / steps for s in range(1, steps + 1)])
    page.select_option("#compare-x", "step")
    page.wait_for_function("() => document.getElementById('compare-1').layout.xaxis.title.text === 'step'")
    assert line(page.evaluate(TRACES, "compare-1"), ids["calm"])["x"] == list(range(1, 101))


def test_a_hidden_run_leaves_every_chart(page: Page, live: Stack, ids: dict[str, int]) -> None:
    open_compare(page, live, ids)
    page.uncheck(f"#compare-shown-{ids['spiky']}")
    page.wait_for_function("(id) => document.getElementById('compare-2').data"
                           ".some((t) => String(t.meta) === String(id) && t.visible === false)",
                           arg=ids["spiky"])
    for chart in ("compare-1", "compare-2"):
        traces = page.evaluate(TRACES, chart)
        assert line(traces, ids["spiky"])["visible"] is False
        assert line(traces, ids["calm"])["visible"] is True
    page.check(f"#compare-shown-{ids['spiky']}")
    page.wait_for_function("(id) => document.getElementById('compare-2').data"
                           ".every((t) => t.visible !== false)", arg=ids["spiky"])


def test_the_controls_survive_a_live_refresh(page: Page, live: Stack, ids: dict[str, int]) -> None:
    running, headers = reporting_run(live)
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "kl": 0.01 * s}} for s in range(1, 6)]
    reply = httpx.post(f"{live.url}/api/runs/{running}/metrics", json={"rows": rows},
                       headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    page.goto(f"{live.url}/runs/compare?ids={ids['calm']},{running}")
    expect(page.locator("#compare-1 .main-svg").first).to_be_visible()
    slide(page, "#compare-smoothing-1", 0.5)
    page.check("#compare-log-2")
    page.uncheck(f"#compare-shown-{ids['calm']}")
    page.select_option("#compare-x", "percent")
    page.wait_for_function("() => document.getElementById('compare-2').layout.yaxis.type === 'log'")
    more = [{"step": 6, "metrics": {"reward": 0.6, "kl": 0.06}}]
    assert httpx.post(f"{live.url}/api/runs/{running}/metrics", json={"rows": more},
                      headers=headers, timeout=30).status_code == 200
    # the refreshed figure (step 6) is drawn with the reader's choices still applied
    page.wait_for_function("(id) => document.getElementById('compare-1').data"
                           ".some((t) => String(t.meta) === String(id) && t.y.length === 6)",
                           arg=running, timeout=20_000)
    reward = page.evaluate(TRACES, "compare-1")
    assert line(reward, running, "smoothed-")["y"] == pytest.approx(
        ema([0.1 * s for s in range(1, 7)], 0.5), rel=1e-12)
    assert line(reward, ids["calm"])["visible"] is False
    assert line(reward, running)["x"] == pytest.approx([100 * s / 20 for s in range(1, 7)])
    assert page.evaluate(LAYOUT, "compare-2")["y"] == "log"
    expect(page.locator("#compare-smoothing-1")).to_have_value("0.5")
    expect(page.locator("#compare-log-2")).to_be_checked()


COUNT_POLLS = ("() => { window.polls = 0; document.body.addEventListener('htmx:afterSettle',"
               " (e) => { if (e.detail.elt.id === 'compare-runs') window.polls++; }); }")


def live_comparison(page: Page, live: Stack, ids: dict[str, int], query: str = "") -> int:
    """A comparison with a running run (so it polls every few seconds): its id."""
    running, headers = reporting_run(live, "kept-live")
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "kl": 0.01 * s}} for s in range(1, 6)]
    reply = httpx.post(f"{live.url}/api/runs/{running}/metrics", json={"rows": rows},
                       headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    page.goto(f"{live.url}/runs/compare?ids={ids['calm']},{running}{query}")
    expect(page.locator("#compare-1 .main-svg").first).to_be_visible()
    return running


def test_the_controls_are_kept_by_a_refresh_that_brings_no_new_points(
        page: Page, live: Stack, ids: dict[str, int]) -> None:
    """The poll swaps the controls even when the figure is unchanged (the chart is not redrawn):
    they must come back as the reader left them, and the poll must carry them."""
    polled: list[str] = []
    page.on("request", lambda r: polled.append(r.url) if "/runs/compare/_live" in r.url else None)
    live_comparison(page, live, ids)
    slide(page, "#compare-smoothing-1", 0.7)
    page.check("#compare-log-2")
    page.wait_for_function("() => document.getElementById('compare-2').layout.yaxis.type === 'log'")
    page.evaluate(COUNT_POLLS)
    page.wait_for_function("() => window.polls >= 1", timeout=20_000)
    expect(page.locator("#compare-smoothing-1")).to_have_value("0.7")
    expect(page.locator("#compare-box-1 output")).to_have_text("0.7")
    expect(page.locator("#compare-log-2")).to_be_checked()
    expect(page.locator("#compare-log-1")).not_to_be_checked()
    assert "smooth=reward%3A0.7" in polled[-1] and "log=kl" in polled[-1], polled[-1]
    assert page.evaluate(LAYOUT, "compare-2")["y"] == "log"


def test_the_controls_are_kept_by_a_reload_and_a_shared_link(
        page: Page, live: Stack, ids: dict[str, int]) -> None:
    running = live_comparison(page, live, ids)
    slide(page, "#compare-smoothing-2", 0.5)
    page.check("#compare-log-1")
    page.select_option("#compare-x", "percent")
    page.wait_for_function("() => location.search.includes('x=percent')")
    assert "smooth=kl%3A0.5" in page.url and "log=reward" in page.url
    page.reload()
    expect(page.locator("#compare-1 .main-svg").first).to_be_visible()
    expect(page.locator("#compare-smoothing-2")).to_have_value("0.5")
    expect(page.locator("#compare-log-1")).to_be_checked()
    expect(page.locator("#compare-x")).to_have_value("percent")
    page.wait_for_function("() => document.getElementById('compare-1').layout.yaxis.type === 'log'")
    kl = page.evaluate(TRACES, "compare-2")
    assert line(kl, running, "smoothed-")["y"] == pytest.approx(
        ema([0.01 * s for s in range(1, 6)], 0.5), rel=1e-12)
    assert page.evaluate(LAYOUT, "compare-2")["x"].startswith("%")
    slide(page, "#compare-smoothing-2", 0)  # back to the default: gone from the URL
    page.wait_for_function("() => !location.search.includes('smooth=')")


def stored_runs(live: Stack, prefix: str, count: int) -> list[int]:
    """Queued runs straight in the stack's database (cheap: no worker, no metrics)."""
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            runs = [service.create_run(db, spec=RunSpec(name=f"{prefix}-{i}"))[0]
                    for i in range(count)]
            db.commit()
            return [r.id for r in runs]
    finally:
        engine.dispose()


@pytest.mark.parametrize("ticked, words", [(0, "Tick 2 to 8 runs"), (1, "(1 ticked)"),
                                           (9, "At most 8 runs")])
def test_compare_selected_answers_inline(page: Page, live: Stack, ticked: int,
                                         words: str) -> None:
    prefix = f"inline{ticked}"
    runs = stored_runs(live, prefix, 9)
    page.goto(f"{live.url}/runs?q={prefix}-")
    for run_id in runs[:ticked]:
        page.check(f'#run-row-{run_id} input[name="ids"]')
    page.click("#compare-button")
    expect(page.locator("#compare-message")).to_contain_text(words)
    expect(page.locator("#compare-message")).to_be_visible()
    assert "/runs/compare" not in page.url  # no navigation to the compare page's 400
    if ticked:  # a valid choice then goes through
        for run_id in runs[2:ticked]:
            page.uncheck(f'#run-row-{run_id} input[name="ids"]')
        if ticked == 1:
            page.check(f'#run-row-{runs[1]} input[name="ids"]')
        page.click("#compare-button")
        expect(page).to_have_url(re.compile(r"/runs/compare\?ids="))


@pytest.fixture
def axe_page(browser: Browser) -> Iterator[Page]:
    """axe is injected as a script: the page's CSP (script-src 'self') is bypassed for it."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, bypass_csp=True)
    yield context.new_page()
    context.close()


def test_the_compare_page_and_the_inline_message_pass_axe(axe_page: Page, live: Stack,
                                                          ids: dict[str, int]) -> None:
    page = axe_page
    open_compare(page, live, ids)
    page.click("#spec-diff-panel summary")  # the folded differences, open
    expect(page.locator("#spec-diff")).to_be_visible()
    assert serious_violations(page) == []
    stored_runs(live, "axe-inline", 2)
    page.goto(f"{live.url}/runs?q=axe-inline-")
    page.click("#compare-button")
    expect(page.locator("#compare-message")).to_be_visible()
    assert serious_violations(page) == []


def hidden_in_every_chart(page: Page, run_id: int) -> None:
    page.wait_for_function(
        "(id) => ['compare-1', 'compare-2'].every((c) => document.getElementById(c).data"
        ".some((t) => String(t.meta) === String(id) && t.visible === false))", arg=run_id)


def test_hidden_runs_are_kept_in_the_url_for_a_reload_and_a_shared_link(
        page: Page, browser: Browser, live: Stack, ids: dict[str, int]) -> None:
    """Issue 56 (8e): a run hidden with its checkbox or its legend entry came back on reload;
    it is kept in the address (``hide=ID``), so a reload and a copied link hide it too, and the
    legend entry hides the run on every chart, as the checkbox does."""
    open_compare(page, live, ids)
    page.uncheck(f"#compare-shown-{ids['spiky']}")
    hidden_in_every_chart(page, ids["spiky"])
    assert re.search(rf"[?&]hide={ids['spiky']}(&|$)", page.url), page.url
    page.reload()
    expect(page.locator("#compare-1 .main-svg").first).to_be_visible()
    expect(page.locator(f"#compare-shown-{ids['spiky']}")).not_to_be_checked()
    hidden_in_every_chart(page, ids["spiky"])
    shared = browser.new_context().new_page()  # a link sent to someone: no local state
    shared.goto(page.url)
    expect(shared.locator("#compare-1 .main-svg").first).to_be_visible()
    expect(shared.locator(f"#compare-shown-{ids['spiky']}")).not_to_be_checked()
    hidden_in_every_chart(shared, ids["spiky"])
    shared.context.close()

    page.check(f"#compare-shown-{ids['spiky']}")
    page.wait_for_function("() => !/[?&]hide=/.test(location.search)")
    page.locator("#compare-1 .legend .traces").filter(has_text="calm").first.click()
    hidden_in_every_chart(page, ids["calm"])  # the legend hides the run everywhere
    expect(page.locator(f"#compare-shown-{ids['calm']}")).not_to_be_checked()
    assert re.search(rf"[?&]hide={ids['calm']}(&|$)", page.url), page.url
    page.reload()
    hidden_in_every_chart(page, ids["calm"])
