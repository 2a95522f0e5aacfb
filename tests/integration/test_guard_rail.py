"""The guard rail on a real stack: a real worker trains a run whose reward never varies, the
server's diagnostics raise a critical finding as the metrics stream in, and the worker is told
to stop through its next report; the run ends cancelled with the reason."""

from __future__ import annotations

import httpx
import pytest
from bs4 import BeautifulSoup

from tests.conftest import TINY
from tests.stack import TERMINAL, Stack

MAX_STEPS = 10_000  # far beyond what the guard rail lets it reach; the same run without the
# guard rail trains to its end (test_runs_end_to_end: a constant reward is diagnosed)


@pytest.mark.parametrize("stack", ["embedded"], indirect=True)  # the rail is backend-agnostic
def test_guard_rail_stops_a_real_workers_run_with_the_reason(stack: Stack) -> None:
    run_id = stack.launch(name="it-guard", max_steps=MAX_STEPS, stop_on_critical=True, **TINY,
                          rewards=[{"name": "constant", "params": {"value": 0.0}}])
    run = stack.wait_for(run_id, TERMINAL, timeout=300)
    assert run["status"] == "cancelled", run
    assert run["started_at"] and run["finished_at"] and run["error"] is None
    findings = httpx.get(f"{stack.url}/api/runs/{run_id}/findings", timeout=10).json()
    critical = [f for f in findings["findings"] if f["severity"] == "critical"]
    assert critical, findings
    # the reason is the first critical finding's summary (the tiny model's completions are all
    # cut at max_completion_length; the constant reward gives zero spread: either may come first)
    reason = run["stop_reason"].removeprefix("stopped by diagnostics: ")
    assert reason != run["stop_reason"], run
    assert reason.split(" since step")[0] in {f["summary"].split(" since step")[0]
                                               for f in critical}, (reason, critical)
    assert run["step"] < 100  # stopped within a few report batches, far from MAX_STEPS
    page = BeautifulSoup(httpx.get(f"{stack.url}/runs/{run_id}/_status", timeout=10).text,
                         "html.parser")
    assert page.select_one("#run-status").get_text(strip=True) == "cancelled"
    assert run["stop_reason"] in page.select_one("#status-panel").get_text()
