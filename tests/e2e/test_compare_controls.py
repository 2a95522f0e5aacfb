"""The compare page's chart controls in a browser: per-chart smoothing and log y, the x axis as
step / time since start / % of run, and hiding a run (static/compare.js)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.metrics import pipeline
from app.runs import service
from grpodeck.contract.spec import RunSpec
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
