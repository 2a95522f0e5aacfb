"""A dry run whose worker is killed mid-sampling is failed by the scheduler, with the reason on
its page (issue 33: it stayed "queued" with "Sampling and scoring on a worker..." for 16+ min).

Real processes on both brokers: the web app, a Celery worker and ``grpodeck scheduler``. The
worker's whole process group gets SIGKILL once it said it started the dry run (its sampling
child dies with it). Short bounds (settings) keep the wait in seconds: pings every second, lost
after 10 s of silence, checked every second.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import tiny_spec
from tests.integration.conftest import live_stack
from tests.stack import Stack

LOST_AFTER_S = 10
ENV = {"GRPODECK_LOST_AFTER_SECONDS": str(LOST_AFTER_S), "GRPODECK_LOST_CHECK_SECONDS": "1",
       "GRPODECK_HEARTBEAT_SECONDS": "1", "GRPODECK_BROKER_VISIBILITY_SECONDS": "20"}


@pytest.fixture(scope="module", params=["embedded", "postgres-redis"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    with live_stack(request.param, tmp_path_factory.mktemp(f"dry-lost-{request.param}"), ENV,
                    scheduler=True) as live:
        yield live


def poll(url: str, check: str, ok: object, timeout: float, stack: Stack) -> dict:  # type: ignore[type-arg]
    """The dry run once ``body[check] == ok`` (or, for ``ok=...``, once it is set)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(url, timeout=10).json()
        if (body[check] is not None) if ok is ... else body[check] == ok:
            return body
        time.sleep(0.2)
    raise AssertionError(f"dry run: {check} not {ok} within {timeout} s: {body}\n"
                         f"worker:\n{stack.log('worker')}\nscheduler:\n{stack.log('scheduler')}")


def test_a_killed_worker_fails_its_dry_run_with_the_reason(stack: Stack) -> None:
    reply = httpx.post(f"{stack.url}/api/dry-runs", params={"prompts": 2}, timeout=30,
                       json=tiny_spec(name="dry-lost"))
    assert reply.status_code == 202, reply.text
    url = f"{stack.url}/api/dry-runs/{reply.json()['id']}"
    started = poll(url, "started_at", ..., 180, stack)
    assert started["status"] == "queued" and started["worker"]
    stack.kill("worker", signal.SIGKILL)  # the whole group: Celery, its pool, the sampling child
    killed_at = time.monotonic()
    body = poll(url, "status", "failed", LOST_AFTER_S + 60, stack)
    assert time.monotonic() - killed_at >= LOST_AFTER_S - 1  # silence, not an early guess
    assert body["error"].startswith(f"worker lost: worker {started['worker']} gave no sign")
    page = httpx.get(f"{stack.url}/dry-runs/{body['id']}", timeout=10).text
    assert "worker lost" in page and "Sampling and scoring on a worker" not in page
