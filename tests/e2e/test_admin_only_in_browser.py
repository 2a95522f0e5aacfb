"""What only an admin reads, in a real browser on a stack that requires login (issue 56): how
to configure custom rewards (``GRPODECK_CUSTOM_REWARDS``, the entry point group) on the new-run
form, and the alert destinations settings in the navigation. A normal account gets a plain line
on the form and no settings link."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import DESK
from tests.locked_stack import ADMIN, PASSWORD, LoggedInStack, cli
from tests.stack import Stack

USER = "someone@example.com"


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """An admin (made by LoggedInStack) and a normal account, made with the CLI; no custom
    reward allowed (the suite allows one by default), the case whose line said how to allow
    one."""
    workdir = tmp_path_factory.mktemp("admin-only")
    stack = LoggedInStack(f"sqlite:///{workdir / 'grpodeck.db'}",
                          f"sqla+sqlite:///{workdir / 'broker.db'}", workdir,
                          extra_env={"GRPODECK_CUSTOM_REWARDS": ""}).start()
    try:
        made = cli("user", "create", USER, "--password-stdin", env=stack.env,
                   stdin=PASSWORD + "\n")
        assert made.returncode == 0, made.stderr
        yield stack
    finally:
        stack.stop()


def logged_in(browser: Browser, stack: Stack, email: str) -> Iterator[Page]:
    context = browser.new_context(viewport=DESK)
    page = context.new_page()
    page.goto(f"{stack.url}/login")
    page.fill("#f-email", email)
    page.fill("#f-password", PASSWORD)
    page.click("#login")
    page.wait_for_url("**/runs")
    yield page
    context.close()


@pytest.fixture
def user_page(browser: Browser, locked: Stack) -> Iterator[Page]:
    yield from logged_in(browser, locked, USER)


@pytest.fixture
def admin_page(browser: Browser, locked: Stack) -> Iterator[Page]:
    yield from logged_in(browser, locked, ADMIN)


def test_a_normal_account_reads_a_plain_line_about_custom_rewards(user_page: Page,
                                                                   locked: Stack) -> None:
    user_page.goto(f"{locked.url}/runs/new")
    help_line = user_page.locator("#custom-rewards-help")
    expect(help_line).to_contain_text("none (an admin can allow them)")
    expect(help_line).not_to_contain_text("GRPODECK_CUSTOM_REWARDS")
    expect(help_line).not_to_contain_text("entry point")
    assert "GRPODECK_CUSTOM_REWARDS" not in user_page.inner_html("#custom-rewards")


def test_an_admin_reads_how_to_allow_custom_rewards(admin_page: Page, locked: Stack) -> None:
    admin_page.goto(f"{locked.url}/runs/new")
    help_line = admin_page.locator("#custom-rewards-help")
    expect(help_line).to_contain_text("GRPODECK_CUSTOM_REWARDS")
    expect(help_line).to_contain_text("entry point group grpodeck.rewards")


def test_a_normal_account_has_no_alert_settings_link(user_page: Page, locked: Stack) -> None:
    user_page.goto(f"{locked.url}/runs")
    expect(user_page.locator("header nav")).to_contain_text("Datasets")  # the bar is drawn
    expect(user_page.locator("header nav a[href='/settings/alerts']")).to_have_count(0)


def test_an_admin_finds_the_alert_settings_in_the_navigation(admin_page: Page,
                                                             locked: Stack) -> None:
    admin_page.goto(f"{locked.url}/runs")
    link = admin_page.locator("header nav a[href='/settings/alerts']")
    expect(link).to_have_text("Alert settings")
    link.click()
    admin_page.wait_for_url("**/settings/alerts")
    expect(admin_page.locator("h1")).to_have_text("Alert destinations")
