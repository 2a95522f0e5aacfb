"""The alerts page's run filter offers the runs that have alerts, not every run (a deployment
with 66 runs listed 66, most of which filter to nothing) (issue 56, item 6)."""

from __future__ import annotations

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from tests.alerts.helpers import alerts, healthy, report, start_run, zero_spread


def test_the_run_filter_offers_exactly_the_runs_with_alerts(client: TestClient) -> None:
    with_alerts = []
    for name in ("first", "quiet", "second", "also-quiet"):
        run_id, headers = start_run(client, name=name)
        quiet = "quiet" in name
        report(client, run_id, headers, (healthy if quiet else zero_spread)(range(1, 11)))
        if not quiet:
            with_alerts.append(run_id)
    assert {a["run_id"] for a in alerts(client)} == set(with_alerts)
    page = BeautifulSoup(client.get("/alerts", params={"state": "all"}).text, "html.parser")
    offered = [o["value"] for o in page.select('#alert-filters select[name="run"] option')]
    assert offered == ["", *(str(i) for i in sorted(with_alerts, reverse=True))]
