"""The run page's Export control in a real browser (issue 56, item 4): both formats are on the
page, and a click downloads the run's rows, one per step, NaN kept as its text, while the run
is still reporting."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.test_nonfinite_in_browser import report
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack

SHOT = Path(os.environ.get("GRPODECK_EXPORT_SHOT", "/tmp/shots/export.png"))


def _download(page: Page, selector: str) -> str:
    with page.expect_download() as started:
        page.click(selector)
    download = started.value
    return Path(download.path()).read_text(encoding="utf-8")


def test_export_downloads_the_runs_rows_in_both_formats(desk: Page, live: Stack) -> None:
    run_id, headers = reporting_run(live, name="export-me")
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "loss": "nan" if s == 6 else 0.5}}
            for s in range(1, 41)]
    report(live, run_id, headers, rows)
    desk.goto(f"{live.url}/runs/{run_id}")
    group = desk.locator("#export")
    expect(group).to_be_visible()
    expect(group.get_by_role("link", name="CSV")).to_be_visible()
    expect(group.get_by_role("link", name="JSONL")).to_be_visible()
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    desk.screenshot(path=str(SHOT))

    table = list(csv.reader(io.StringIO(_download(desk, "#export-csv"))))
    assert table[0] == ["step", "loss", "reward"]
    assert [int(r[0]) for r in table[1:]] == list(range(1, 41))
    assert table[6] == ["6", "nan", repr(0.1 * 6)]

    lines = [json.loads(line) for line in _download(desk, "#export-jsonl").splitlines()]
    assert [line["step"] for line in lines] == list(range(1, 41))
    assert lines[5] == {"step": 6, "loss": "nan", "reward": 0.1 * 6}
