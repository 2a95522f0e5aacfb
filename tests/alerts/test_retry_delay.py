"""The delay before each retry of a failed delivery grows geometrically: b, 3b, 9b, ...
(issue 23: a bug that made it constant survived the suite). A receiver that is down for a
while must not be hammered at a fixed rate, and the delay is capped so it is still retried."""

from __future__ import annotations

import pytest

from app.alerts import outbox
from app.core import config as config_module


@pytest.fixture
def base(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GRPODECK_ALERT_RETRY_SECONDS", "2")
    config_module.get_settings.cache_clear()
    yield 2.0
    config_module.get_settings.cache_clear()


def test_each_retry_waits_three_times_longer_than_the_last(base: float) -> None:
    delays = [outbox.backoff(n) for n in range(1, 5)]
    assert delays == [base, 3 * base, 9 * base, 27 * base]


def test_the_delay_stops_growing_at_its_cap(base: float) -> None:
    assert outbox.backoff(50) == outbox.MAX_BACKOFF_S
    assert outbox.backoff(49) == outbox.backoff(50) > outbox.backoff(1)
