"""A person picks the reward-hacking preset in a real browser and the form fills with it: the
hackable proxy trained on, the unit tests at weight 0 watching."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.stack import Stack


def test_preset_picker_fills_the_form(page: Page, live: Stack) -> None:
    page.goto(f"{live.url}/runs/new")
    page.select_option("#f-preset", "reward-hacking")  # applies on choice: no second button
    page.wait_for_url("**/runs/new?preset=reward-hacking")
    expect(page.locator("#preset-description")).to_contain_text("weight 0")
    expect(page.locator("#f-name")).to_have_value("reward-hacking-demo")
    expect(page.locator("#f-dataset")).to_have_value("builtin:easy-python")
    expect(page.locator("#f-reward_0_name")).to_have_value("code_block_count")
    expect(page.locator("#f-reward_1_name")).to_have_value("unit_tests")
    expect(page.locator("#f-reward_1_weight")).to_have_value("0.0")
    expect(page.locator("#f-num_generations")).to_have_value("8")
