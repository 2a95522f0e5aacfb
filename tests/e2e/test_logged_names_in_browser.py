"""The name a user logged stays visible beside the canonical one on the drawn run page
(issue 56): the chart heading and plotly's own legend say ``lr`` for learning_rate."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.app.test_logged_names_shown import loop_log
from tests.stack import Stack


def test_the_drawn_chart_names_the_key_logged(page: Page, live: Stack) -> None:
    reply = httpx.post(f"{live.url}/api/imports", timeout=60,
                       files={"log": ("loop.log", loop_log().encode())})
    assert reply.status_code == 201, reply.text
    page.goto(reply.json()["runs"][0]["url"])
    expect(page.locator("#chart-title-learning_rate")).to_have_text("Learning rate (logged as lr)")
    expect(page.locator("#chart-learning_rate .legendtext").first).to_have_text(
        "learning_rate (lr)")
    expect(page.locator("#coverage-checked")).to_contain_text("reward (mean_reward)")
