"""Password hashing with Argon2id through pwdlib (a maintained library, not hand-rolled crypto),
at pwdlib's recommended cost unless the settings say otherwise; old hashes are upgraded on login
when the parameters change.

The cost is a setting because one hash costs ~0.15 s of CPU and 64 MiB at the recommended
parameters: right for a server, and most of the time of a test suite that signs in accounts by
the hundred (tests/conftest.py sets the minimum; the code path is the same)."""

from __future__ import annotations

from functools import cache

from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher

from app.core.config import get_settings

MIN_LENGTH = 8
MAX_LENGTH = 1024  # Argon2 takes any length; the cap keeps a login form from hashing megabytes


@cache
def _hasher() -> PasswordHash:
    settings = get_settings()
    return PasswordHash((Argon2Hasher(time_cost=settings.argon2_time_cost,
                                      memory_cost=settings.argon2_memory_kib,
                                      parallelism=settings.argon2_parallelism),))


@cache
def _dummy_hash() -> str:
    """Verified against when the email is unknown, so a wrong email costs as long as a wrong
    password."""
    return _hasher().hash("not-a-real-password")


def hash_password(password: str) -> str:
    return _hasher().hash(password)


def verify(password: str, password_hash: str | None) -> tuple[bool, str | None]:
    """(matches, a new hash to store when the stored one uses outdated parameters)."""
    if password_hash is None:
        _hasher().verify(password, _dummy_hash())
        return False, None
    return _hasher().verify_and_update(password, password_hash)


def password_problem(password: str) -> str | None:
    if len(password) < MIN_LENGTH:
        return f"the password must have at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"the password must have at most {MAX_LENGTH} characters"
    return None
