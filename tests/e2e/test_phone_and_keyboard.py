"""Phone and keyboard (issue 24, point 7), in a real browser against a live stack: no page
scrolls sideways at 390 px, every tap target is at least 24 px (WCAG 2.5.8), the plotly
toolbar shows only on hover and never over a legend, and keyboard users skip the charts."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.test_pages_in_browser import run_with_data  # noqa: F401 (a shared fixture)
from tests.stack import Stack

PHONE = {"width": 390, "height": 844}
DRY_SPEC = {"name": "phone-dry", "model": "builtin:tiny-random", "max_completion_length": 8}

# Every page a user can open, by name; {run}, {other} and {dry} are filled in per stack.
PAGES = {
    "runs-list": "/runs",
    "new-run": "/runs/new",
    "run": "/runs/{run}",
    "rollouts": "/runs/{run}/rollouts",
    "logs": "/runs/{run}/logs",
    "compare": "/runs/compare?ids={run},{other}",
    "dry-run": "/dry-runs/{dry}",
    "alerts": "/alerts",
    "alert-settings": "/settings/alerts",
    "datasets": "/datasets",
    "import": "/runs/import",
    "api-docs": "/docs",
    "not-found": "/runs/987654",
}

# Undersized targets: a target is exempt when it is an inline link inside a sentence, or when
# a 24 px circle on its centre meets no other target (WCAG 2.5.8 "spacing"). The plotly
# toolbar is not tab-reachable and shows only on hover; it is checked in its own test.
SMALL_TARGETS = """() => {
  const sel = 'a[href], button, input:not([type=hidden]), select, textarea, summary';
  const shown = el => {
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && r.right > 0 && r.bottom > 0
      && !el.closest('.modebar-container')
      && el.checkVisibility({visibilityProperty: true});  // not inside a closed <details>
  };
  const inSentence = el => {
    if (el.tagName !== 'A' || getComputedStyle(el).display !== 'inline') return false;
    const text = (el.parentElement.textContent || '').trim();
    return text.length > (el.textContent || '').trim().length + 2;
  };
  const all = [...document.querySelectorAll(sel)].filter(shown);
  const boxes = all.map(el => el.getBoundingClientRect());
  const small = all.map((el, i) => boxes[i].width < 24 || boxes[i].height < 24);
  const centre = r => [r.left + r.width / 2, r.top + r.height / 2];
  const gap = (p, r) => Math.hypot(Math.max(r.left - p[0], 0, p[0] - r.right),
                                   Math.max(r.top - p[1], 0, p[1] - r.bottom));
  const crowded = i => boxes.some((r, j) => {
    if (j === i || all[j].contains(all[i]) || all[i].contains(all[j])) return false;
    const c = centre(boxes[i]);
    if (small[j]) { const d = centre(r); return Math.hypot(c[0] - d[0], c[1] - d[1]) < 24; }
    return gap(c, r) < 12;
  });
  return all.map((el, i) => [el, i]).filter(([el, i]) => small[i] && !inSentence(el) && crowded(i))
    .map(([el, i]) => `${el.outerHTML.slice(0, 90)} ${Math.round(boxes[i].width)}x${Math.round(boxes[i].height)}`);
}"""


@pytest.fixture(scope="module")
def urls(live: Stack, run_with_data: int) -> dict[str, str]:  # noqa: F811
    """Each page's URL: a run with charts, rollouts and a long log line; a second run to
    compare with; a dry run with its result, scored by the stack's real worker."""
    dry = httpx.post(f"{live.url}/api/dry-runs", json=DRY_SPEC, timeout=30)
    assert dry.status_code == 202, dry.text
    dry_id = dry.json()["id"]
    live.wait_until(lambda: httpx.get(f"{live.url}/api/dry-runs/{dry_id}").json()["status"]
                    not in ("queued", "running"), "the dry run's result", timeout=300)
    assert httpx.get(f"{live.url}/api/dry-runs/{dry_id}").json()["status"] == "done"
    other = live.launch(name="phone-other", model="builtin:tiny-random", max_steps=1)
    ids = {"run": run_with_data, "other": other, "dry": dry_id}
    return {name: live.url + path.format(**ids) for name, path in PAGES.items()}


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=PHONE, has_touch=True)
    yield context.new_page()
    context.close()


def settle(page: Page) -> None:
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(300)  # plotly resizes to its container after the first frame


@pytest.mark.parametrize("name", list(PAGES))
def test_no_page_scrolls_sideways_at_390px(phone: Page, urls: dict[str, str], name: str) -> None:
    phone.goto(urls[name])
    settle(phone)
    width = phone.evaluate("document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"{name}: the page is {width} px wide on a 390 px screen"


@pytest.mark.parametrize("name", list(PAGES))
def test_tap_targets_are_at_least_24px(phone: Page, urls: dict[str, str], name: str) -> None:
    phone.goto(urls[name])
    settle(phone)
    small = phone.evaluate(SMALL_TARGETS)
    assert small == [], f"{name}: tap targets under 24x24 px with neighbours too close: {small}"


def test_plotly_toolbar_only_on_hover_and_off_the_legend(page: Page, urls: dict[str, str]) -> None:
    page.set_viewport_size({"width": 1440, "height": 900})
    for name in ("run", "compare"):
        page.goto(urls[name])
        settle(page)
        chart = page.locator(".js-plotly-plot").first
        bar = chart.locator(".modebar")
        page.mouse.move(0, 0)
        assert bar.evaluate("el => getComputedStyle(el).opacity") == "0", name
        chart.hover()
        expect(bar).to_have_css("opacity", "1")
        toolbar, legend = bar.bounding_box(), chart.locator(".infolayer .legend").bounding_box()
        assert toolbar is not None and legend is not None
        apart = (toolbar["x"] >= legend["x"] + legend["width"] or legend["y"] >= toolbar["y"] + toolbar["height"]
                 or toolbar["y"] >= legend["y"] + legend["height"] or legend["x"] >= toolbar["x"] + toolbar["width"])
        assert apart, f"{name}: the toolbar {toolbar} covers the legend {legend}"


PAST_CHARTS = """() => {
  const el = document.activeElement, charts = document.querySelector('#charts-panel');
  return el === document.body || (!charts.contains(el)
    && !!(charts.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING));
}"""


def test_keyboard_skips_the_charts(page: Page, urls: dict[str, str]) -> None:
    """Tabbing from the top gets past the charts in a few stops (the plotly toolbar is not in
    the tab order), and the "Skip charts" link, the chart area's first stop, jumps past them."""
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(urls["run"])
    settle(page)
    stops, first_in_charts = 0, None
    while True:
        page.keyboard.press("Tab")
        stops += 1
        if first_in_charts is None:
            first_in_charts = page.evaluate("document.activeElement.closest('#charts-panel')"
                                            " && document.activeElement.id")
        if page.evaluate(PAST_CHARTS):
            break
        assert page.evaluate("!document.activeElement.closest('.modebar')"), "a toolbar button"
        assert stops < 30, "30 tab stops from the top and still in the charts"
    assert first_in_charts == "skip-charts"  # the chart area's first stop
    page.goto(urls["run"])
    settle(page)
    skip = page.locator("a#skip-charts")
    skip.focus()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    expect(page.locator("#after-charts")).to_be_focused()
    assert page.evaluate(PAST_CHARTS)
