"""The Argon2id cost is a setting (the suite runs at the minimum, tests/conftest.py): the
product's default must stay pwdlib's recommended cost, a stored hash made at another cost still
signs in and is rehashed at the current one, and a cost Argon2 refuses is a settings error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pwdlib import PasswordHash
from pydantic import ValidationError

from app.auth import passwords
from app.core import config

COST_VARS = ("GRPODECK_ARGON2_TIME_COST", "GRPODECK_ARGON2_MEMORY_KIB",
             "GRPODECK_ARGON2_PARALLELISM")


@pytest.fixture
def fresh_hasher() -> Iterator[None]:
    """The settings and the hasher built from them, read again inside the test."""
    def clear() -> None:
        config.get_settings.cache_clear()
        passwords._hasher.cache_clear()
        passwords._dummy_hash.cache_clear()
    clear()
    yield
    clear()


def argon2_params(password_hash: str) -> str:
    return password_hash.split("$")[3]  # $argon2id$v=19$m=...,t=...,p=...$salt$hash


def test_the_default_cost_is_pwdlibs_recommended(monkeypatch: pytest.MonkeyPatch,
                                                  fresh_hasher: None) -> None:
    for name in COST_VARS:
        monkeypatch.delenv(name, raising=False)
    recommended = PasswordHash.recommended().hash("a long enough password")
    made = passwords.hash_password("a long enough password")
    assert argon2_params(made) == argon2_params(recommended) == "m=65536,t=3,p=4"


def test_a_hash_from_another_cost_signs_in_and_is_rehashed_at_the_current_one(
        monkeypatch: pytest.MonkeyPatch, fresh_hasher: None) -> None:
    stored = PasswordHash.recommended().hash("a long enough password")
    monkeypatch.setenv("GRPODECK_ARGON2_TIME_COST", "2")
    monkeypatch.setenv("GRPODECK_ARGON2_MEMORY_KIB", "16")
    monkeypatch.setenv("GRPODECK_ARGON2_PARALLELISM", "1")
    matches, updated = passwords.verify("a long enough password", stored)
    assert matches and updated is not None
    assert argon2_params(updated) == "m=16,t=2,p=1"
    assert passwords.verify("a long enough password", updated) == (True, None)
    assert passwords.verify("another long password", updated) == (False, None)
    assert passwords.verify("a long enough password", None) == (False, None)  # unknown email


@pytest.mark.parametrize(("name", "value"), [("GRPODECK_ARGON2_TIME_COST", "0"),
                                             ("GRPODECK_ARGON2_MEMORY_KIB", "7"),
                                             ("GRPODECK_ARGON2_PARALLELISM", "0")])
def test_a_cost_argon2_refuses_is_a_settings_error(monkeypatch: pytest.MonkeyPatch, name: str,
                                                   value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=name.removeprefix("GRPODECK_").lower()):
        config.Settings()


def test_too_little_memory_for_the_lanes_is_a_settings_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_ARGON2_PARALLELISM", "4")
    monkeypatch.setenv("GRPODECK_ARGON2_MEMORY_KIB", "31")
    with pytest.raises(ValidationError, match="at least 8 x argon2_parallelism"):
        config.Settings()
    monkeypatch.setenv("GRPODECK_ARGON2_MEMORY_KIB", "32")
    assert config.Settings().argon2_memory_kib == 32
