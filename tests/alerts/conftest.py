"""Fixtures for alert tests: in-process app on a migrated database, real receivers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from tests.alerts.receivers import HttpReceiver, running_receiver, start_smtp


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with running_receiver() as box:
        yield box


@pytest.fixture
def smtp():  # type: ignore[no-untyped-def]
    controller, box = start_smtp()
    try:
        yield controller, box
    finally:
        controller.stop()


@pytest.fixture
def alert_env(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Set alert settings for the in-process app (settings are cached: clear the cache)."""
    def apply(**values: str) -> None:
        for key, value in values.items():
            monkeypatch.setenv(f"GRPODECK_{key.upper()}", value)
        config_module.get_settings.cache_clear()
    # the receivers listen on loopback, which the outbound URL policy refuses unless allowed
    apply(alert_retry_seconds="0.2", public_url="http://deck.example",
          alert_allow_hosts="127.0.0.1")
    return apply


@pytest.fixture
def client(app_db: str, alert_env) -> TestClient:  # type: ignore[no-untyped-def]
    from app.main import create_app

    return TestClient(create_app(), base_url="http://127.0.0.1")  # development mode: loopback
