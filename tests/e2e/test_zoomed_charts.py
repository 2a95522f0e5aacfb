"""A zoomed chart draws the data that is stored: zoomed into a 100k-step run below the chart's
point budget, the drawn line is the raw points (read from plotly's gd.data), and wider views are
a min-max band around a mean line whose tooltip says so, never a line through the extremes."""

from __future__ import annotations

import math

from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.ingest import pipeline
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.e2e.test_charts_stay_put import drag_zoom
from tests.stack import Stack

STEPS = 100_000
CHUNK = 10_000


def reward(step: int) -> float:
    """A sawtooth of period 7 on a slow drift: a 16-step summary of it is not a raw point."""
    return (step % 7) * 0.1 + step * 1e-5


def long_run(live: Stack, steps: int = STEPS) -> int:
    """A finished run of ``steps`` steps (100k), stored through the real ingest path (points
    and summaries)."""
    engine = make_engine(live.database_url)
    try:
        with Session(engine) as db:
            run, _ = service.create_run(db, spec=RunSpec(name="long-run", max_steps=steps))
            db.commit()
            run_id = run.id
        for start in range(1, steps + 1, CHUNK):
            rows = [(s, {"reward": reward(s)}) for s in range(start, start + CHUNK)]
            with Session(engine) as db:
                run = service.get_run_for_update(db, run_id)
                pipeline.receive(db, run, rows, track_progress=False)
                db.commit()
        with Session(engine) as db:
            run = service.get_run_for_update(db, run_id)
            run.status = "succeeded"  # not live: no poll redraws the charts under the test
            db.commit()
    finally:
        engine.dispose()
    return run_id


# The reward chart's lines and bands as drawn: (meta, x, y, hovertemplate) per trace.
DRAWN = """() => document.getElementById('chart-reward').data.map(
  (t) => ({ meta: t.meta ?? null, x: t.x, y: t.y, hover: t.hovertemplate ?? null }))"""
RAW_LINE_IS = """([lo, hi]) => {
  const t = document.getElementById('chart-reward').data.find((d) => d.meta == null);
  return t && t.x.length > 0 && t.x[0] === lo && t.x[t.x.length - 1] === hi;
}"""


def mean_line(page: Page) -> dict:
    return next(t for t in page.evaluate(DRAWN) if t["meta"] is None)


def test_zoom_draws_the_stored_points_and_summaries_as_bands(page: Page, live: Stack) -> None:
    run_id = long_run(live)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible()

    # the whole run: a band (two edges, the upper filled) under a mean line that says so
    whole = page.evaluate(DRAWN)
    assert [t["meta"] for t in whole if t["meta"] == "band"] == ["band", "band"]
    line = mean_line(page)
    assert "mean of %{customdata[2]} steps" in line["hover"] and "(raw)" not in line["hover"]
    assert max(line["y"]) < 0.6 + STEPS * 1e-5  # means, not the sawtooth's extremes

    # zoomed to ~1,500 steps (under the 2,000-point budget): the raw points, all of them
    drag_zoom(page, "chart-reward", 0.400, 0.415)
    page.wait_for_function("() => document.getElementById('chart-reward').layout.xaxis.autorange === false")
    x0, x1 = page.evaluate("document.getElementById('chart-reward').layout.xaxis.range.slice()")
    first, last = max(1, math.floor(x0)), math.ceil(x1)
    assert 0 < last - first < 2_000
    page.wait_for_function(RAW_LINE_IS, arg=[first, last])
    drawn = page.evaluate(DRAWN)
    assert not [t for t in drawn if t["meta"] == "band"]
    line = mean_line(page)
    assert line["x"] == list(range(first, last + 1))
    assert line["y"] == [reward(s) for s in range(first, last + 1)]
    assert line["hover"] == "%{y:.4~g} (raw)"
    # the smoothed line is recomputed from the fetched points
    smoothed = next(t for t in drawn if t["meta"] == "smoothed")
    assert smoothed["x"] == line["x"]

    # zoomed out to 10,000 steps: 16-step summaries joined two by two (626 would weigh more than
    # the page's 2,000-point budget), drawn as a band with a mean line
    page.evaluate("Plotly.relayout('chart-reward', {'xaxis.range': [40000, 50000]})")
    page.wait_for_function(RAW_LINE_IS, arg=[40015.5, 49999.5])  # bucket middles
    line = mean_line(page)
    assert "mean of %{customdata[2]} steps" in line["hover"]
    first_bucket = range(40000, 40032)
    assert math.isclose(line["y"][0], sum(reward(s) for s in first_bucket) / 32)
    assert [t["meta"] for t in page.evaluate(DRAWN)].count("band") == 2


def test_a_findings_charts_link_draws_the_stored_points_of_its_range(page: Page,
                                                                     live: Stack) -> None:
    """Issue 56: a finding's "charts at steps A-B" link (?steps=A-B) set the x-range but drew
    the whole run's summaries: 1 point in 9,000-9,100 of a 10,000-step run, where a drag zoom
    to the same steps draws the 101 stored points. The link's range is fetched as a zoom is."""
    run_id = long_run(live, steps=10_000)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live.url}/runs/{run_id}?steps=9000-9100#charts-panel")
    expect(page.locator("#chart-reward .main-svg").first).to_be_visible()
    assert page.evaluate("document.getElementById('chart-reward').layout.xaxis.range") == [
        8999.5, 9100.5]
    page.wait_for_function("""() => { const t = document.getElementById('chart-reward').data
        .find((d) => d.meta == null);
      return t.x.filter((x) => x >= 9000 && x <= 9100).length > 50; }""", timeout=10_000)
    line = mean_line(page)
    inside = [(x, y) for x, y in zip(line["x"], line["y"], strict=True) if 9000 <= x <= 9100]
    assert [x for x, _ in inside] == list(range(9000, 9101))  # 101 stored points
    assert [y for _, y in inside] == [reward(x) for x, _ in inside]
    assert line["hover"] == "%{y:.4~g} (raw)"
    assert not [t for t in page.evaluate(DRAWN) if t["meta"] == "band"]
