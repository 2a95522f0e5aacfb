"""Browser tests: Debian's chromium driven by Playwright (no browser download)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tests.stack import Stack

DESK = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for every browser test (each makes its own runs); start() cleans up after
    itself when it fails."""
    workdir = tmp_path_factory.mktemp("e2e")
    stack = Stack(f"sqlite:///{workdir / 'grpodeck.db'}", f"sqla+sqlite:///{workdir / 'broker.db'}",
                  workdir).start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def desk(browser: Browser) -> Iterator[Page]:
    """A page in a 1440x900 window (a module that needs more, e.g. axe's CSP bypass, has its
    own)."""
    context = browser.new_context(viewport=DESK)
    yield context.new_page()
    context.close()
