"""Forms, phone layout, the rollout inspector's URL and accessibility, in a real browser.

axe-core (npm, a dev dependency) is injected from node_modules by the test only; the app
never serves it. The context bypasses the app's CSP for that one injected script."""

from __future__ import annotations

import io
import math
import tarfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from app.core.config import ROOT
from tests.alerts.helpers import healthy, zero_spread
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


def _tar(name: str, size: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = size
        tar.addfile(info, io.BytesIO(b"x" * size))
    return buf.getvalue()


@pytest.fixture(scope="module")
def faded_pair(live: Stack) -> tuple[int, int]:
    """Two runs whose findings opened and then resolved (faded items on the run page and on
    /alerts?state=all), the second ended with saved artifacts (a wide table on a phone)."""
    ids = []
    for name in ("faded-one", "faded-two"):
        run_id, headers = reporting_run(live, name=name, alerts={"min_severity": "info"})
        rows = zero_spread(range(1, 61)) + healthy(range(61, 300))
        for start in range(0, len(rows), 20):
            reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics",
                               json={"rows": rows[start:start + 20]}, headers=headers)
            assert reply.status_code == 200, reply.text
        ids.append((run_id, headers))
    (first, _), (second, headers) = ids
    for name, kind, step in (("checkpoint-1.tar", "checkpoint", 1),
                             ("final-model.tar", "model", 2),
                             ("trainer_state.json", "trainer_state", 2)):  # what a run saves
        body = _tar("model.safetensors", 123_456) if name.endswith(".tar") else b"{}"
        reply = httpx.post(f"{live.url}/api/runs/{second}/artifacts", headers=headers,
                           params={"name": name, "kind": kind, "step": step}, content=body)
        assert reply.status_code == 201, reply.text
    reply = httpx.post(f"{live.url}/api/runs/{second}/finished", json={"returncode": 0},
                       headers=headers)
    assert reply.status_code == 200, reply.text
    resolved = httpx.get(f"{live.url}/api/alerts", params={"state": "resolved"}).json()
    assert {a["run_id"] for a in resolved} >= {first, second}  # faded items on both pages
    return first, second


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
    page.click("#training > summary")  # a folded section (issue 56); an error reopens it
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
    page.click("#training > summary")
    page.fill("#f-per_device_train_batch_size", "5")
    page.click("#launch")
    expect(page.locator("#f-per_device_train_batch_size")).to_be_focused()
    no_horizontal_scroll(page)
    page.screenshot(path=str(SHOTS / "pages-after-form-390.png"), full_page=True)


def test_a_phone_never_scrolls_sideways_and_its_targets_are_24_px(
        phone: Page, live: Stack, faded_pair: tuple[int, int]) -> None:
    """Issue 34: the artifacts page was 432 px wide at 390; nav links and finding summaries
    were 16-19 px tall."""
    page = phone
    one, two = faded_pair
    for path in (f"/runs/{two}/artifacts", f"/runs/{one}", "/alerts?state=all", "/runs",
                 "/runs/new", f"/runs/compare?ids={one},{two}", f"/runs/{one}/rollouts"):
        page.goto(live.url + path)
        page.wait_for_load_state("networkidle")
        no_horizontal_scroll(page)
        small = page.evaluate("""() => [...document.querySelectorAll(
                'header nav a, header nav button, header .brand, .findings summary')]
            .filter(e => e.offsetParent !== null && e.getBoundingClientRect().height < 24)
            .map(e => e.textContent.trim().slice(0, 30))""")
        assert small == [], (path, small)
    page.goto(f"{live.url}/runs/{two}/artifacts")
    expect(page.locator("#artifacts tbody tr")).to_have_count(3)


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


def test_axe_finds_no_serious_violations(desk: Page, live: Stack, run_with_data: int,
                                        faded_pair: tuple[int, int]) -> None:
    """Resolved findings and alerts included (issue 34: faded by opacity, they failed colour
    contrast: 5 serious on the run page, 888 on /alerts?state=all)."""
    page = desk
    problems = {}
    one, two = faded_pair
    for path in ("/runs", f"/runs/{run_with_data}", "/runs/new",
                 f"/runs/{run_with_data}/rollouts", f"/runs/{run_with_data}/logs",
                 "/runs/import", "/datasets", "/alerts",
                 "/settings/alerts", "/runs/987654", f"/runs/{one}", f"/runs/{two}",
                 "/alerts?state=all", f"/runs/compare?ids={one},{two}",
                 f"/runs/{two}/artifacts", f"/runs/{one}/rollouts"):
        page.goto(live.url + path)
        page.wait_for_load_state("networkidle")
        problems[path] = serious_violations(page)
    page.goto(f"{live.url}/runs/new")
    page.click("#training > summary")
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


def test_memory_charts_tick_in_binary_units_under_the_system_heading(desk: Page,
                                                                     live: Stack) -> None:
    """Issue 34: memory ticks read "1.2G" or raw bytes; they read MiB / GiB, under the system
    group's own heading."""
    run_id, headers = reporting_run(live, name="memory-run")
    rows = [{"step": s, "metrics": {"reward": 0.1, "system/cpu_percent": 50.0,
                                    "system/rss_bytes": 1.2e9 + s * 3e7}} for s in range(1, 31)]
    reply = httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers)
    assert reply.status_code == 200, reply.text
    page = desk
    page.goto(f"{live.url}/runs/{run_id}")
    chart = page.locator("#chart-system_rss")
    chart.scroll_into_view_if_needed()
    expect(chart.locator(".ytick").first).to_contain_text("GiB")
    ticks = [t.strip() for t in chart.locator(".ytick text").all_text_contents()]
    assert ticks and all(t.endswith(" GiB") for t in ticks), ticks
    heading = page.locator("#chart-group-system")
    expect(heading).to_contain_text("System")
    assert heading.bounding_box()["y"] < chart.bounding_box()["y"]  # type: ignore[index]
