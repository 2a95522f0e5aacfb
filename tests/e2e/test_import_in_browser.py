"""Upload a log made elsewhere; the run page shows the verdict, the findings with evidence and
actions, and the finding's step range shaded on its chart."""

from __future__ import annotations

import json
import math
import os

from playwright.sync_api import Page, expect

from tests.stack import Stack


def kl_blowup_log(path) -> None:  # type: ignore[no-untyped-def]
    rows = [{"step": s, "loss": 0.01, "reward": 0.5 + 0.001 * s, "reward_std": 0.3,
             "frac_reward_zero_std": 0.1, "kl": 0.02 if s < 100 else 0.02 * math.exp((s - 100) / 15),
             "completions/mean_length": 120.0, "grad_norm": 1.0} for s in range(1, 201)]
    path.write_text(json.dumps({"global_step": 200, "log_history": rows}))


def test_uploaded_log_shows_findings_and_marks(page: Page, live: Stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "trainer_state.json"
    kl_blowup_log(log)
    page.goto(f"{live.url}/runs/import")
    page.set_input_files("#f-log", str(log))
    page.fill("#f-import-name", "kl-drift")
    page.click("#import")
    page.wait_for_url("**/runs/*")
    expect(page.locator("#run-verdict")).to_have_text("critical")  # sustained: severity.py
    finding = page.locator('.finding[data-category="kl_blowup"]')
    expect(finding).to_be_visible()
    expect(finding).to_contain_text("What to try")
    expect(page.locator(".run-head")).to_contain_text("imported from trainer_state.json")
    # the finding's range is shaded on the KL chart (a plotly layout shape)
    expect(page.locator("#chart-kl .shapelayer path")).not_to_have_count(0)
    page.screenshot(path=os.environ.get("GRPODECK_SHOT2", str(tmp_path / "import.png")),
                    full_page=True)
