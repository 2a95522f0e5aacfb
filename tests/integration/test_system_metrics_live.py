"""Done-when of issue 25's system metrics: a run launched on a real stack (form -> Celery ->
worker -> TRL on builtin:tiny-random) reports ``system/*`` through its sender, and its run page
shows them as their own chart group."""

from __future__ import annotations

import httpx

from tests.app.conftest import html, one
from tests.conftest import TINY
from tests.stack import Stack


def test_a_launched_run_shows_its_system_metrics_on_its_page(stack: Stack) -> None:
    run_id = stack.launch(name="it-system", max_steps=3, **TINY)
    run = stack.wait_for(run_id, {"succeeded", "failed", "cancelled"})
    assert run["status"] == "succeeded", run
    series = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", timeout=10).json()
    assert {"system/cpu_percent", "system/rss_bytes", "system/tokens_per_s"} <= set(series)
    assert series["system/cpu_percent"]["steps"][-1] == 3  # the last sample, as training ended
    assert min(series["system/rss_bytes"]["values"]) > 50e6
    page = httpx.get(f"{stack.url}/runs/{run_id}", timeout=10).text
    assert one(page, "#chart-group-system").get_text().startswith("System")
    keys = [b["data-key"] for b in html(page).select(".chart-box[data-group=system]")]
    assert keys == ["system_cpu", "system_rss", "system_throughput"]  # no GPU on this machine
    assert "Resident memory (training process):" in page  # the charts in words
