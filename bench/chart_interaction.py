"""Browser time of the run page's chart interactions on a 5,000-step run (target: < 200 ms).

Usage: python bench/chart_interaction.py [--steps 5000] [--repeats 9] [--smoke]
(--smoke: 2,500 steps, 2 tries each: the same path in chromium, for tests/test_benches.py)

Starts the web app (uvicorn, SQLite in a temporary folder), stores a finished run of STEPS
steps x 25 TRL metrics through the real ingest path, opens its page in Debian's chromium
(Playwright) at 1440x900, and measures in the page, from the input to the next painted frame:

* smoothing: the slider moved (an ``input`` event) until the charts in view are painted
  again, and until the last of the others (redrawn one per idle moment) is;
* linked zoom: one chart zoomed (Plotly.relayout, as a drag ends) until the charts in view
  are painted at the new range, and until every chart follows;
* zoom data: the same, until every chart draws the refetched steps of the new range (this
  includes the 250 ms debounce that waits for the last relayout of a drag, and the request).

It prints the median and the worst of REPEATS tries each. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load import METRICS

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

# Resolves after the frame that follows the change has been produced (two animation frames:
# the redraw scheduled by the input runs in the first, the paint follows).
NEXT_FRAME = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
SMOOTH = """async (v) => {
  const charts = [...document.querySelectorAll('#charts-panel .chart')];
  const shown = charts.filter((el) => { const r = el.getBoundingClientRect();
                                        return r.bottom > 0 && r.top < innerHeight; });
  const slider = document.getElementById('chart-smoothing');
  const t0 = performance.now();
  slider.value = String(v);
  slider.dispatchEvent(new Event('input', { bubbles: true }));
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const inView = performance.now() - t0;
  const smoothedWith = (el) => { const t = el.data.find((d) => d.meta === 'smoothed');
                                 const raw = el.data.find((d) => d.meta == null);
                                 return t && raw.opacity === 0.3; };
  if (!shown.every(smoothedWith)) throw new Error('a chart in view was not redrawn');
  // every chart: the ones out of view are redrawn when idle (static/charts.js eachChart)
  const drawnAt = new Map();
  charts.forEach((el) => el.on('plotly_afterplot', () => drawnAt.set(el, performance.now())));
  await new Promise((r) => setTimeout(r, 1500));
  const all = Math.max(inView, ...[...drawnAt.values()].map((t) => t - t0));
  charts.forEach((el) => el.removeAllListeners('plotly_afterplot'));
  return [inView, all, shown.length];
}"""
ZOOM = """async ([a, b]) => {
  const charts = [...document.querySelectorAll('#charts-panel .chart')];
  const shown = charts.filter((el) => { const r = el.getBoundingClientRect();
                                        return r.bottom > 0 && r.top < innerHeight; });
  const t0 = performance.now();
  await Plotly.relayout(charts[0], { 'xaxis.range': [a, b] });
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const inView = performance.now() - t0;
  if (!shown.every((el) => el.layout.xaxis.range[0] === a)) throw new Error('a chart in view did not follow');
  const wait = async (done) => {
    while (!charts.every(done) && performance.now() - t0 < 10000)
      await new Promise((r) => setTimeout(r, 2));
    return performance.now() - t0;
  };
  const all = await wait((el) => el.layout.xaxis.range[0] === a);
  // the refetched steps: every chart's line starts inside the new range
  const data = await wait((el) => { const t = el.data.find((d) => d.meta == null);
    return t && t.x.length && t.x[0] >= a - 16 && t.x[0] <= a + 16; });
  return [inView, all, data];
}"""


def fill(database_url: str, steps: int) -> int:
    """A finished run of ``steps`` x 25 metrics through the real ingest path."""
    from sqlalchemy.orm import Session

    from app.core.db import make_engine
    from app.ingest import pipeline
    from app.runs import service
    from grpodeck.contract.spec import RunSpec

    engine = make_engine(database_url)
    try:
        with Session(engine) as db:
            run, _ = service.create_run(db, spec=RunSpec(name="bench", max_steps=steps))
            db.commit()
            run_id = run.id
        for start in range(1, steps + 1, 1_000):
            rows = [(s, {n: math.sin(s / 100 + i) + 0.1 * ((s * 7) % 5) for i, n in
                         enumerate(METRICS)}) for s in range(start, min(start + 1_000, steps + 1))]
            with Session(engine) as db:
                run = service.get_run_for_update(db, run_id)
                pipeline.receive(db, run, rows, track_progress=False)
                db.commit()
        with Session(engine) as db:
            run = service.get_run_for_update(db, run_id)
            run.status = "succeeded"
            db.commit()
    finally:
        engine.dispose()
    return run_id


def report(label: str, times: list[float]) -> None:
    print(f"{label:<40} median {statistics.median(times):7.1f} ms   worst {max(times):7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--smoke", action="store_true", help="2,500 steps, 2 tries each")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.repeats = 2_500, 2

    from playwright.sync_api import sync_playwright

    from tests.stack import Stack

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stack = Stack(f"sqlite:///{work / 'bench.db'}", f"sqla+sqlite:///{work / 'broker.db'}",
                      work)
        try:
            import subprocess

            subprocess.run([sys.executable, "-m", "app.cli", "migrate"], env=stack.env,
                           cwd=ROOT, check=True, timeout=120)
            stack.start_web()
            run_id = fill(stack.database_url, args.steps)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(f"{stack.url}/runs/{run_id}")
                page.wait_for_selector("#charts-panel .chart .main-svg")
                page.evaluate(NEXT_FRAME)
                charts = page.locator("#charts-panel .chart").count()
                print(f"{args.steps} steps x {len(METRICS)} metrics, {charts} charts, "
                      f"chromium {browser.version}")
                smooth = [page.evaluate(SMOOTH, 0.3 + 0.05 * (i % 10))
                          for i in range(args.repeats)]
                scale = args.steps / 5_000  # the ranges below were chosen for 5,000 steps
                zoom = [page.evaluate(ZOOM, [round((200 + 300 * i) * scale),
                                             round((1_200 + 300 * i) * scale)])
                        for i in range(args.repeats)]
                browser.close()
            print(f"charts in view at 1440x900: {smooth[0][2]}")
            report("smoothing: charts in view painted", [t[0] for t in smooth])
            report("smoothing: every chart redrawn", [t[1] for t in smooth])
            report("linked zoom: charts in view painted", [t[0] for t in zoom])
            report("linked zoom: every chart followed", [t[1] for t in zoom])
            report("zoom data refetched (250 ms debounce)", [t[2] for t in zoom])
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
