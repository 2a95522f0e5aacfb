"""Issue 24, points 3, 5, 6 and 8 in a real browser: the runs list reads like a tracker, no
internal values on the run page, the new-run form flows top-down, progress is visible."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.imports import service as imports
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.e2e.conftest import PHONE
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=PHONE)
    yield context.new_page()
    context.close()


def send_rows(live: Stack, run_id: int, headers: dict[str, str], top: float) -> None:
    rows = [{"step": s, "metrics": {"reward": top * s / 30, "kl": 0.01 * s,
                                    "frac_reward_zero_std": 0.25}} for s in range(1, 31)]
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers)
    assert reply.status_code == 200, reply.text


def import_folder(live: Stack, folder: Path) -> int:
    """A TRL output folder (trainer_state.json and the saved model's config.json) imported
    into the stack's database, as `grpodeck import OUTPUT_DIR` does."""
    folder.mkdir()
    history = [{"step": s, "reward": 0.05 * s, "kl": 0.001 * s, "loss": 0.1} for s in range(1, 11)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history,
                                                           "max_steps": 10}))
    (folder / "config.json").write_text(json.dumps({"_name_or_path": "Qwen/Qwen2.5-0.5B"}))
    engine = make_engine(live.database_url)
    with Session(engine) as db:
        run = imports.import_log(db, folder / "trainer_state.json")
        db.commit()
        run_id = run.id
    engine.dispose()
    return run_id


def test_runs_list_numbers_columns_sort_and_sparkline(desk: Page, live: Stack,
                                                      tmp_path: Path) -> None:
    page = desk
    low, low_headers = reporting_run(live, "tracker-low")
    high, high_headers = reporting_run(live, "tracker-high")
    send_rows(live, low, low_headers, 0.3)
    send_rows(live, high, high_headers, 0.9)
    imported = import_folder(live, tmp_path / "tracker-outside")
    page.goto(f"{live.url}/runs?q=tracker")
    high_row = page.locator(f"#run-row-{high}")
    expect(page.locator(f"#run-row-{low} td.col-reward")).to_have_text("0.3")
    expect(high_row.locator("td.col-reward")).to_have_text("0.9")
    expect(high_row.locator("td.col-best")).to_have_text("0.9")
    expect(high_row.locator("td.col-kl")).to_have_text("0.3")
    assert high_row.locator("svg.spark polyline").get_attribute("points").count(",") >= 10
    # the import is named after its folder and shows its model
    imported_row = page.locator(f"#run-row-{imported}")
    expect(imported_row.locator("td[data-label=Name]")).to_contain_text("tracker-outside")
    expect(imported_row.locator("td[data-label=Model]")).to_have_text("Qwen/Qwen2.5-0.5B")
    # zero-spread is off by default; turn it on, KL off: remembered after a reload
    expect(high_row.locator("td.col-zero_spread")).to_be_hidden()
    page.click("#columns-menu summary")
    page.check("#columns-menu input[value=zero_spread]")
    page.uncheck("#columns-menu input[value=kl]")
    page.reload()
    expect(page.locator(f"#run-row-{high} td.col-zero_spread")).to_have_text("25%")
    expect(page.locator(f"#run-row-{high} td.col-kl")).to_be_hidden()
    # newest first by default; sorting by reward puts the best run on top, then the worst
    ids = "#runs-grid tbody tr"
    assert page.locator(ids).first.get_attribute("id") == f"run-row-{imported}"
    page.click("a.sort-col[data-sort=reward]")  # sorted on the server (the import has none)
    expect(page.locator(ids).first).to_have_attribute("id", f"run-row-{high}")
    expect(page.locator("th.col-reward")).to_have_attribute("aria-sort", "descending")
    page.click("a.sort-col[data-sort=reward]")
    expect(page.locator(ids).first).to_have_attribute("id", f"run-row-{low}")


def test_runs_list_filters_fold_on_a_phone(phone: Page, live: Stack) -> None:
    page = phone
    run_id, headers = reporting_run(live, "tracker-phone")
    send_rows(live, run_id, headers, 0.7)  # its last reward fits the card
    page.goto(f"{live.url}/runs")
    # the card keeps the last reward; the sparkline stays on wider screens (issue 56)
    expect(page.locator(f"#run-row-{run_id} td.col-reward")).to_have_text("0.7")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    expect(page.locator("#run-filters")).to_be_hidden()
    first_run = page.locator("#runs-grid tbody tr").first
    assert first_run.bounding_box()["y"] < PHONE["height"]
    page.click("#filter-panel summary")
    expect(page.locator("#run-filters input[name=q]")).to_be_visible()


def outside_run(live: Stack, name: str) -> tuple[int, dict[str, str]]:
    """A run some script trains itself and reports (POST /api/runs with source external): its
    spec knows the group size and nothing else the header used to print."""
    reply = httpx.post(f"{live.url}/api/runs", json={"source": "external", "name": name,
                                                     "spec": {"num_generations": 8}})
    assert reply.status_code == 201, reply.text
    return reply.json()["id"], {"Authorization": f"Bearer {reply.json()['token']}"}


def test_outside_run_shows_no_internal_values_and_cancel_confirms(desk: Page,
                                                                  live: Stack) -> None:
    page = desk
    run_id, headers = outside_run(live, "outside-script")
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "kl": 0.01}} for s in range(1, 6)]
    assert httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                      headers=headers).status_code == 200
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#run-facts")).to_have_text("reported by an outside script · G=8")
    head_and_status = page.locator(".run-head").inner_text() + page.locator(
        "#status-panel").inner_text()
    assert "None" not in head_and_status and "0.00" not in head_and_status, head_and_status
    expect(page.locator("#rollouts-link")).to_have_count(0)  # nothing captured: no dead tab
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-run")
    expect(page.locator("#run-status")).to_have_text("cancelling")
    expect(page.locator("#toast")).to_contain_text(f"Cancelling run {run_id}")


def test_test_alert_needs_a_destination_and_confirms_inline(desk: Page, live: Stack) -> None:
    page = desk
    page.goto(f"{live.url}/settings/alerts")
    page.fill("#f-urls", "")
    page.click("#save-destinations")
    expect(page.locator("#send-test")).to_be_disabled()
    expect(page.locator("#test-why")).to_contain_text("Add a destination")
    page.fill("#f-urls", "json://alerts.example.com/hook")
    page.click("#save-destinations")
    expect(page.locator("#send-test")).to_be_enabled()
    page.evaluate("window.samePage = true")
    page.click("#send-test")
    expect(page.locator("#test-result")).to_contain_text("Test alert queued for 1 destination")
    assert page.evaluate("window.samePage") is True  # the answer came inline, no reload


def test_new_run_form_flows_top_down_in_plain_words(desk: Page, live: Stack) -> None:
    page = desk
    page.goto(f"{live.url}/runs/new")
    # try first, launch last: Dry run and Smoke test come before Launch in reading order (one
    # action bar since issue 56: the same line, left to right)
    boxes = {b: page.locator(f"#{b}").bounding_box() for b in ("dry-run", "smoke-test", "launch")}
    order = {b: (round(box["y"] + box["height"] / 2), box["x"]) for b, box in boxes.items()}
    assert order["dry-run"] < order["smoke-test"] < order["launch"], order
    # an unused reward row has no weight until a reward is chosen in it
    expect(page.locator("#f-reward_1_weight")).to_have_value("")
    page.select_option("#f-reward_1_name", "length_target")
    expect(page.locator("#f-reward_1_weight")).to_have_value("1.0")
    page.select_option("#f-reward_1_name", "")
    expect(page.locator("#f-reward_1_weight")).to_have_value("")
    # errors in plain words, at their fields
    page.fill("#f-num_generations", "1")
    page.click("#training > summary")  # a folded section (issue 56)
    page.fill("#f-max_steps", "2.5")
    page.select_option("#f-reward_1_name", "length_target")
    page.fill("#f-reward_1_params", "target=abc")
    page.click("#launch")
    expect(page.locator("#e-num_generations")).to_have_text("must be at least 2")
    expect(page.locator("#e-max_steps")).to_have_text("must be a whole number, e.g. 8")
    expect(page.locator("#e-reward_1_params")).to_contain_text("target must be a whole number")
    assert "Input should" not in page.locator("#form-errors").inner_text()
    # a preset fills the form as soon as it is chosen
    page.select_option("#f-preset", "reward-hacking")
    page.wait_for_url("**/runs/new?preset=reward-hacking")
    expect(page.locator("#f-reward_1_name")).to_have_value("unit_tests")
    expect(page.locator("#f-reward_1_weight")).to_have_value("0.0")
    expect(page.locator("#use-preset")).to_be_hidden()


def send_log(live: Stack, run_id: int, headers: dict[str, str], chunks: list[dict],
             stage: str | None = None) -> None:
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/logs",
                       json={"chunks": chunks, "stage": stage}, headers=headers)
    assert reply.status_code == 200, reply.text


def test_stages_timer_and_live_logs_tab(desk: Page, live: Stack) -> None:
    page = desk
    run_id, headers = reporting_run(live, "staged-run")  # claimed: its child is starting
    page.goto(f"{live.url}/runs/{run_id}")
    expect(page.locator("#run-stage")).to_contain_text("loading model")
    expect(page.locator("#run-stages li.current")).to_have_text("loading model")
    before = page.locator("#run-elapsed").inner_text()
    expect(page.locator("#run-elapsed")).not_to_have_text(before)  # the timer ticks
    send_log(live, run_id, headers, [{"stream": "stdout", "offset": 0,
                                      "text": "[grpodeck] stage: first_step\nhello from the child\n"}],
             stage="first_step")
    expect(page.locator("#run-stage")).to_contain_text("waiting for the first step")
    httpx.post(f"{live.url}/api/runs/{run_id}/metrics", headers=headers,
               json={"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}).raise_for_status()
    expect(page.locator("#run-stages li.current")).to_have_text("training")
    expect(page.locator("#run-stages li.done")).to_have_count(3)
    # the Logs tab tails the output while the run is live
    page.click("#logs-link")
    expect(page.locator("#log-text")).to_contain_text("hello from the child")
    send_log(live, run_id, headers, [{"stream": "stderr", "offset": 0,
                                      "text": "Traceback? no: a warning on stderr\n"}])
    expect(page.locator("#log-text")).to_contain_text("a warning on stderr")
    download = page.request.get(f"{live.url}/runs/{run_id}/logs.txt")
    assert download.ok and "attachment" in download.headers["content-disposition"]
    assert download.text() == ("[grpodeck] stage: first_step\nhello from the child\n"
                               "Traceback? no: a warning on stderr\n")


def test_queued_runs_show_their_place_in_line(desk: Page, live: Stack) -> None:
    page = desk
    engine = make_engine(live.database_url)
    with Session(engine) as db:  # queued with no task sent: nobody takes them
        first, _ = service.create_run(db, spec=RunSpec(name="in-line-1", model="builtin:tiny-random"))
        second, _ = service.create_run(db, spec=RunSpec(name="in-line-2", model="builtin:tiny-random"))
        db.commit()
        ids = first.id, second.id
    engine.dispose()
    try:
        positions = []
        for run_id in ids:
            page.goto(f"{live.url}/runs/{run_id}")
            expect(page.locator("#run-stages li.current")).to_have_text("queued")
            text = page.locator("#run-stage").inner_text()
            positions.append(0 if "next in line" in text else int(text.split("queued: ")[1].split()[0]))
        assert positions[1] == positions[0] + 1, positions
    finally:
        for run_id in ids:
            httpx.post(f"{live.url}/api/runs/{run_id}/cancel")
