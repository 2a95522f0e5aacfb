"""Queries and writes for accounts. Functions flush, never commit: the caller owns the
transaction."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from app.auth import passwords
from app.auth.models import ApiKey, User, UserSession

API_KEY_PREFIX = "gd_"
LAST_USED_RESOLUTION = timedelta(minutes=1)


class AccountError(ValueError):
    """A request about accounts that cannot be honoured; the message says why."""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were stored in UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def normalise_email(email: str) -> str:
    email = email.strip().lower()
    local, _, domain = email.partition("@")
    if not local or "." not in domain or len(email) > 254 or any(c.isspace() for c in email):
        raise AccountError(f"not an email address: {email!r}")
    return email


# Per database (its engine), until when "there are users" holds without asking again.
_USERS_SEEN: WeakKeyDictionary[Engine, float] = WeakKeyDictionary()
USERS_SEEN_S = 5.0


def any_users(db: Session) -> bool:
    """Whether any account exists (none: a local request is in development mode).

    Asked by every local request, every page poll included (a query each: ~7 % of the web
    process under bench/load.py), so a "yes" is remembered for ``USERS_SEEN_S``. Only a yes:
    the first account is enforced at once, and accounts are never deleted by the app."""
    engine = db.get_bind()
    if time.monotonic() < _USERS_SEEN.get(engine, 0.0):  # type: ignore[arg-type]
        return True
    found = db.scalar(select(User.id).limit(1)) is not None
    if found:
        _USERS_SEEN[engine] = time.monotonic() + USERS_SEEN_S  # type: ignore[index]
    return found


def create_user(db: Session, *, email: str, password: str, is_admin: bool = False) -> User:
    email = normalise_email(email)
    if (problem := passwords.password_problem(password)) is not None:
        raise AccountError(problem)
    if db.scalar(select(User.id).where(User.email == email)) is not None:
        raise AccountError(f"a user with the email {email} already exists")
    user = User(email=email, password_hash=passwords.hash_password(password), is_admin=is_admin)
    db.add(user)
    db.flush()
    return user


def list_users(db: Session) -> Sequence[User]:
    return db.scalars(select(User).order_by(User.id)).all()


def authenticate(db: Session, *, email: str, password: str) -> User | None:
    """The user whose email and password these are, or None (same cost either way)."""
    if len(password) > passwords.MAX_LENGTH:
        return None
    user = db.scalar(select(User).where(User.email == email.strip().lower()))
    ok, new_hash = passwords.verify(password, user.password_hash if user else None)
    if not ok or user is None:
        return None
    if new_hash:
        user.password_hash = new_hash
    return user


# --- browser sessions: a random id in the cookie, only its hash in the database ---

def start_session(db: Session, user: User, *, days: float) -> str:
    session_id = secrets.token_urlsafe(32)
    db.add(UserSession(id_hash=_digest(session_id), user_id=user.id,
                       expires_at=_now() + timedelta(days=days)))
    db.execute(delete(UserSession).where(UserSession.user_id == user.id,
                                         UserSession.expires_at < _now()))
    db.flush()
    return session_id


def session_user(db: Session, session_id: str) -> User | None:
    row = db.get(UserSession, _digest(session_id))
    if row is None or _aware(row.expires_at) < _now():
        return None
    return db.get(User, row.user_id)


def end_session(db: Session, session_id: str) -> None:
    db.execute(delete(UserSession).where(UserSession.id_hash == _digest(session_id)))


# --- API keys: shown once at creation, stored hashed, revocable ---

def create_api_key(db: Session, user: User, *, name: str) -> tuple[ApiKey, str]:
    name = name.strip()[:80] or "key"
    key = API_KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(user_id=user.id, name=name, prefix=key[:10], key_hash=_digest(key))
    db.add(row)
    db.flush()
    return row, key


def api_key_user(db: Session, key: str) -> User | None:
    if not key.startswith(API_KEY_PREFIX):
        return None
    row = db.scalar(select(ApiKey).where(ApiKey.key_hash == _digest(key)))
    if row is None or row.revoked_at is not None:
        return None
    now = _now()
    if row.last_used_at is None or now - _aware(row.last_used_at) > LAST_USED_RESOLUTION:
        row.last_used_at = now  # not on every call: a polling script would write every second
    return db.get(User, row.user_id)


def api_keys_of(db: Session, user_id: int) -> Sequence[ApiKey]:
    return db.scalars(select(ApiKey).where(ApiKey.user_id == user_id)
                      .order_by(ApiKey.revoked_at.is_not(None), ApiKey.id.desc())).all()


def revoke_api_key(db: Session, *, user_id: int, key_id: int) -> ApiKey:
    row = db.get(ApiKey, key_id)
    if row is None or row.user_id != user_id:
        raise AccountError(f"you have no API key {key_id}")
    if row.revoked_at is None:
        row.revoked_at = _now()
    return row
