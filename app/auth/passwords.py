"""Password hashing with pwdlib's recommended Argon2id parameters (a maintained library, not
hand-rolled crypto); old hashes are upgraded on login when the parameters change."""

from __future__ import annotations

from pwdlib import PasswordHash

MIN_LENGTH = 8
MAX_LENGTH = 1024  # Argon2 takes any length; the cap keeps a login form from hashing megabytes

_hasher = PasswordHash.recommended()
# Verified against when the email is unknown, so a wrong email costs as long as a wrong password.
_DUMMY_HASH = _hasher.hash("not-a-real-password")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify(password: str, password_hash: str | None) -> tuple[bool, str | None]:
    """(matches, a new hash to store when the stored one uses outdated parameters)."""
    if password_hash is None:
        _hasher.verify(password, _DUMMY_HASH)
        return False, None
    return _hasher.verify_and_update(password, password_hash)


def password_problem(password: str) -> str | None:
    if len(password) < MIN_LENGTH:
        return f"the password must have at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"the password must have at most {MAX_LENGTH} characters"
    return None
