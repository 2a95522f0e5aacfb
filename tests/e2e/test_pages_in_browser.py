"""Forms, phone layout, the rollout inspector's URL and accessibility, in a real browser.

axe-core (npm, a dev dependency) is injected from node_modules by the test only; the app
never serves it. The context bypasses the app's CSP for that one injected script."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from app.core.config import ROOT
from tests.app.test_rollouts import step_payload
from tests.e2e.test_rollouts_in_browser import reporting_run
from tests.stack import Stack

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
SHOTS = Path("/tmp")


@pytest.fixture(scope="module")
def run_with_data(live: Stack) -> int:
    """A live run with charts' metrics and captured rollouts, one long completion among them."""
    run_id, headers = reporting_run(live)
    rows = [{"step": s, "metrics": {"reward": math.sin(s / 4) + s / 20, "kl": 0.002 * s,
                                    "loss": 0.1, "entropy": 1 - s / 40, "grad_norm": 1 + s % 5,
                                    "completions/mean_length": 20 + s,
                                    "completions/clipped_ratio": 0.1}} for s in range(1, 21)]
    late = step_payload(20)
    late["groups"][3]["completions"][0]["text"] = "BEGIN " + "long text " * 150 + "THE END"
    body = {"rows": rows, "rollouts": [step_payload(10), late]}
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    log = {"chunks": [{"stream": "stderr", "offset": 0, "text": "loading " + "x" * 500 + "\n"}]}
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/logs", json=log, headers=headers)
    assert reply.status_code == 200, reply.text  # a long unbroken line for the Logs tab
    return run_id


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=PHONE, bypass_csp=True)
    yield context.new_page()
    context.close()


@pytest.fixture
def desk(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, bypass_csp=True)
    yield context.new_page()
    context.close()


def no_horizontal_scroll(page: Page) -> None:
    page.wait_for_timeout(300)  # plotly resizes to its container after the first frame
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url}: page is {width} px wide on a 390 px screen"


def serious_violations(page: Page) -> list[str]:
    assert AXE.exists(), f"{AXE} is missing: `make setup-test` (npm ci with dev dependencies)"
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']}))
        .violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
        .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3)
             .map(n => n.target.join(' ')).join(', '))""")
    return list(found)


def test_form_errors_at_their_fields_with_focus(desk: Page, live: Stack) -> None:
    page = desk
    page.goto(f"{live.url}/runs/new")
    page.fill("#f-name", "kept-name")
    page.fill("#f-per_device_train_batch_size", "5")
    page.fill("#f-max_steps", "0")
    page.click("#launch")
    batch = page.locator("#f-per_device_train_batch_size")
    expect(batch).to_be_focused()  # the first invalid field, in the form's order
    expect(batch).to_have_value("5")
    expect(page.locator("#e-per_device_train_batch_size")).to_contain_text("multiple of the group size")
    expect(page.locator("#e-max_steps")).to_be_visible()  # the second error is not lost
    expect(page.locator("#f-name")).to_have_value("kept-name")
    page.screenshot(path=str(SHOTS / "pages-after-form-1440.png"), full_page=True)
    page.locator("#form-errors a[href='#f-max_steps']").click()  # the list leads to the field
    expect(page.locator("#f-max_steps")).to_be_in_viewport()


def test_phone_layout_has_no_horizontal_scroll(phone: Page, live: Stack, run_with_data: int) -> None:
    page = phone
    for name, path in (("run", f"/runs/{run_with_data}"), ("rollouts", f"/runs/{run_with_data}/rollouts"),
                       ("logs", f"/runs/{run_with_data}/logs"),
                       ("import", "/runs/import"), ("alerts-settings", "/settings/alerts"),
                       ("datasets", "/datasets"), ("alerts", "/alerts"), ("404", "/runs/987654")):
        page.goto(live.url + path)
        if name == "run":
            expect(page.locator("#chart-reward .main-svg").first).to_be_visible()
            box = page.locator("#chart-reward").bounding_box()
            assert box is not None and box["width"] <= PHONE["width"]  # the chart follows its box
        no_horizontal_scroll(page)
        page.screenshot(path=str(SHOTS / f"pages-after-{name}-390.png"), full_page=True)
    page.goto(f"{live.url}/runs/new")
    page.fill("#f-per_device_train_batch_size", "5")
    page.click("#launch")
    expect(page.locator("#f-per_device_train_batch_size")).to_be_focused()
    no_horizontal_scroll(page)
    page.screenshot(path=str(SHOTS / "pages-after-form-390.png"), full_page=True)


def test_rollout_filters_live_in_the_url(desk: Page, live: Stack, run_with_data: int) -> None:
    page = desk
    base = f"{live.url}/runs/{run_with_data}/rollouts"
    page.goto(base)
    expect(page.locator("#groups-summary")).to_contain_text("4 groups at step 20")
    page.select_option("#f-step", "10")
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("step") == ["10"], timeout=10_000)
    page.select_option("#f-outcome", "all_fail")
    expect(page.locator("#groups article")).to_have_count(1)
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("outcome") == ["all_fail"], timeout=10_000)
    shared = page.url
    page.go_back()  # the step filter alone, form and groups as they were
    page.wait_for_url(lambda url: "outcome" not in parse_qs(urlsplit(url).query), timeout=10_000)
    expect(page.locator("#f-outcome")).to_have_value("")
    expect(page.locator("#f-step")).to_have_value("10")
    expect(page.locator("#groups article")).to_have_count(4)
    page.goto(shared)  # a shared link opens the same view
    expect(page.locator("#f-outcome")).to_have_value("all_fail")
    expect(page.locator("#groups article")).to_have_count(1)
    page.goto(base)
    page.fill("#f-q", "write code")  # prompts are searched too
    expect(page.locator("#groups article")).to_have_count(1)
    page.select_option("#f-step", "")  # ... across every captured step
    expect(page.locator("#groups article")).to_have_count(2)
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("q") == ["write code"], timeout=10_000)
    page.wait_for_load_state("networkidle")  # the search box's change on blur has landed
    # a long completion opens whole
    card = page.locator("article[data-step='20'][data-group='3']")
    card.locator("details summary").first.click()
    expect(card.locator("pre.full")).to_contain_text("THE END")
    expect(card.locator("pre.preview")).to_be_hidden()


def test_axe_finds_no_serious_violations(desk: Page, live: Stack, run_with_data: int) -> None:
    page = desk
    problems = {}
    for path in ("/runs", f"/runs/{run_with_data}", "/runs/new",
                 f"/runs/{run_with_data}/rollouts", f"/runs/{run_with_data}/logs",
                 "/runs/import", "/datasets", "/alerts",
                 "/settings/alerts", "/runs/987654"):
        page.goto(live.url + path)
        page.wait_for_load_state("networkidle")
        problems[path] = serious_violations(page)
    page.goto(f"{live.url}/runs/new")
    page.fill("#f-per_device_train_batch_size", "5")
    page.click("#launch")
    problems["/runs/new (with errors)"] = serious_violations(page)
    assert all(not v for v in problems.values()), problems


def test_skip_link_and_progressbar(desk: Page, live: Stack, run_with_data: int) -> None:
    page = desk
    page.goto(f"{live.url}/runs/{run_with_data}")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    bar = page.get_by_role("progressbar", name="Training progress")
    expect(bar).to_have_attribute("aria-valuenow", "20")
    expect(page.locator("#summary-reward")).to_contain_text("at step 20")
    expect(page.locator("#status-announcer")).to_have_attribute("aria-live", "polite")
