"""Issue 22 point 6: failed sign-ins slow the guesser down, never lock the admin out, and the
address they are counted against cannot be picked by the guesser with X-Forwarded-For.

In-process (the ladder, per account and address), and live through `grpodeck serve` (the
forwarded header is the server's business: uvicorn believed it from loopback by default)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.auth import throttle
from app.main import create_app
from tests.app.test_auth import PASSWORD, login, make_user
from tests.locked_stack import ADMIN, LoggedInStack
from tests.locked_stack import PASSWORD as ADMIN_PASSWORD

ATTACKER, ADMIN_HOME = ("203.0.113.9", 40000), ("198.51.100.7", 40000)


def from_address(address: tuple[str, int]) -> TestClient:
    return TestClient(create_app(), base_url="http://127.0.0.1", client=address)


@pytest.fixture
def fresh_counts(app_db: str) -> Iterator[None]:
    throttle.reset()
    yield
    throttle.reset()


@pytest.mark.one_backend
def test_wrong_passwords_from_one_address_wait_longer_and_longer(fresh_counts: None) -> None:
    make_user("ada@example.com")
    attacker = from_address(ATTACKER)
    waits = []
    for _ in range(2):  # fail until refused, note the wait; then let the first rung's minute pass
        while (reply := login(attacker, "ada@example.com", "guess")).status_code == 401:
            pass
        assert reply.status_code == 429
        waits.append(int(reply.headers["retry-after"]))
        _first_rung_passes("ada@example.com", ATTACKER[0])
    assert waits[0] <= 60 < waits[1] <= 15 * 60, waits


def _first_rung_passes(email: str, address: str) -> None:
    """What a minute's wait does to the first rung: its moving window empties."""
    limits = throttle._current()
    limits.limiter.clear(limits.per_account_address[0], "login-account-address",
                         f"{email}|{address}")


@pytest.mark.one_backend
def test_the_admin_from_another_address_is_never_locked_out(fresh_counts: None) -> None:
    make_user("root@example.com", admin=True)
    attacker = from_address(ATTACKER)
    codes = {login(attacker, "root@example.com", "guess").status_code for _ in range(40)}
    assert codes == {401, 429}  # the guesser is slowed...
    assert login(attacker, "root@example.com", PASSWORD).status_code == 429  # ...even if right
    assert login(from_address(ADMIN_HOME), "root@example.com").status_code == 303  # admin is in


class ServedStack(LoggedInStack):
    """The web app as `grpodeck serve` starts it (no worker needed)."""

    def start_web(self) -> None:
        self._spawn("web", [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1",
                            "--port", str(self.port), "--no-migrate"])
        self._wait_ready()

    def start_worker(self) -> None:
        pass


def _served(workdir: Path, **env: str) -> ServedStack:
    stack = ServedStack(f"sqlite:///{workdir / 'grpodeck.db'}",
                        f"sqla+sqlite:///{workdir / 'broker.db'}", workdir, extra_env=env)
    stack.start()
    return stack


def _sign_in(url: str, email: str, password: str, forwarded_for: str) -> int:
    return httpx.post(f"{url}/login", data={"email": email, "password": password,
                                            "next": "/runs"},
                      headers={"X-Forwarded-For": forwarded_for}).status_code


def test_forwarded_for_from_loopback_is_ignored_without_trusted_proxies(tmp_path: Path) -> None:
    stack = _served(tmp_path)
    try:
        # a fresh made-up address and account each try: counted against 127.0.0.1 all the same
        codes = [_sign_in(stack.url, f"u{i}@example.com", "guess", f"192.0.2.{i}")
                 for i in range(1, 40)]
        assert 429 in codes, codes
    finally:
        stack.stop()


def test_forwarded_for_is_believed_from_a_trusted_proxy(tmp_path: Path) -> None:
    stack = _served(tmp_path, GRPODECK_TRUSTED_PROXIES="127.0.0.1")
    try:
        codes = {_sign_in(stack.url, ADMIN, "guess", "203.0.113.9") for _ in range(30)}
        assert codes == {401, 429}
        assert _sign_in(stack.url, ADMIN, ADMIN_PASSWORD, "198.51.100.7") == 303
    finally:
        stack.stop()
