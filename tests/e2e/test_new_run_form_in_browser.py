"""The new-run form in a real browser at 1440x900 (issue 56): the first screen holds what every
run needs (preset, model, dataset, rewards, group size) and the Launch / Dry run / Smoke test
buttons; the rest is folded into sections that open by themselves where a field has an error
and say in their summary what a preset or clone changed from the defaults. A refused form keeps
the chosen preset."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.stack import Stack

ESSENTIALS = ("#f-preset", "#f-name", "#f-model", "#f-dataset", "#f-reward_0_name",
              "#f-reward_0_weight", "#f-reward_0_params", "#f-reward_2_name",
              "#f-num_generations")
BUTTONS = ("#launch", "#dry-run", "#smoke-test")
SECTIONS = ("training", "generation", "evaluation", "monitoring", "advanced")
SCREEN = 900  # px: the whole form ends in the first screen (at 1,889 px before issue 56)


def form_bottom(page: Page) -> float:
    """Where the form ends, from the top of the page (not of the window)."""
    return page.evaluate("document.getElementById('run-form').getBoundingClientRect().bottom"
                         " + window.scrollY")


def open_sections(page: Page) -> list[str]:
    return page.eval_on_selector_all("#run-form details.form-section[open]",
                                     "els => els.map(e => e.id)")


def test_first_screen_holds_the_essentials_and_the_buttons(desk: Page, live: Stack) -> None:
    desk.goto(f"{live.url}/runs/new")
    for selector in ESSENTIALS + BUTTONS:
        expect(desk.locator(selector)).to_be_in_viewport(ratio=1)
    assert desk.evaluate("window.scrollY") == 0
    for section in SECTIONS:  # folded, each a native <details> with a visible summary
        expect(desk.locator(f"#{section} > summary")).to_be_in_viewport(ratio=1)
    assert open_sections(desk) == []
    assert form_bottom(desk) <= SCREEN, form_bottom(desk)


def test_a_field_with_an_error_opens_its_section(desk: Page, live: Stack) -> None:
    desk.goto(f"{live.url}/runs/new")
    desk.click("#training > summary")  # what a person does to reach max_steps
    desk.fill("#f-max_steps", "0")
    desk.click("#generation > summary")
    desk.fill("#f-temperature", "-1")
    desk.click("#training > summary")  # folded again before sending: the error must reopen it
    desk.click("#generation > summary")
    desk.click("#launch")
    expect(desk.locator("#form-errors")).to_be_visible()
    assert sorted(open_sections(desk)) == ["generation", "training"]
    expect(desk.locator("#f-max_steps")).to_be_focused()  # the first invalid field, visible
    expect(desk.locator("#e-temperature")).to_be_visible()
    expect(desk.locator("#training > summary")).to_contain_text("1 field to fix")
    desk.locator("#form-errors a[href='#f-temperature']").click()
    expect(desk.locator("#f-temperature")).to_be_in_viewport()


def test_a_preset_names_what_it_changed_in_the_folded_summaries(desk: Page,
                                                                live: Stack) -> None:
    desk.goto(f"{live.url}/runs/new?preset=reward-hacking")
    assert open_sections(desk) == []
    training = desk.locator("#training > summary")
    expect(training).to_contain_text("max_steps 40")
    expect(training).to_contain_text("learning_rate 2e-05")
    expect(desk.locator("#generation > summary")).to_contain_text("max_completion_length 160")
    expect(desk.locator("#evaluation > summary")).not_to_contain_text("changed")
    expect(desk.locator("#f-max_steps")).to_have_value("40")  # inside, folded, and sent
    expect(desk.locator("#f-max_steps")).to_be_hidden()


def test_a_refused_form_keeps_the_chosen_preset(desk: Page, live: Stack) -> None:
    desk.goto(f"{live.url}/runs/new")
    desk.select_option("#f-preset", "reward-hacking")
    desk.wait_for_url("**/runs/new?preset=reward-hacking")
    desk.fill("#f-num_generations", "1")
    desk.click("#launch")
    expect(desk.locator("#form-errors")).to_contain_text("num_generations")
    expect(desk.locator("#f-preset")).to_have_value("reward-hacking")
    expect(desk.locator("#preset-description")).to_contain_text("weight 0")
    expect(desk.locator("#f-reward_1_name")).to_have_value("unit_tests")
