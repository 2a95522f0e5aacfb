"""Failed sign-ins are limited per account and per client address (password guessing).

Only failures count, so a person who types their password right is never slowed; once an
account (or an address) used up its allowance inside the moving window, further tries are
refused before the password is even checked, with how long to wait. Counting is the `limits`
library's moving window on the storage ``login_limit_storage`` names (memory by default: per
web process; Redis to share it between processes).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache

from limits import RateLimitItem, parse, storage, strategies

from app.core.config import get_settings

ADDRESS_FACTOR = 4  # one address may try several accounts (a shared office NAT), not unboundedly


@dataclass(frozen=True)
class Limits:
    limiter: strategies.MovingWindowRateLimiter
    per_account: RateLimitItem
    per_address: RateLimitItem


@lru_cache(maxsize=4)
def _limits(spec: str, storage_url: str) -> Limits:
    account = parse(spec)
    address = type(account)(account.amount * ADDRESS_FACTOR, account.multiples,
                            account.namespace)
    return Limits(strategies.MovingWindowRateLimiter(storage.storage_from_string(storage_url)),
                  account, address)


def _current() -> Limits:
    settings = get_settings()
    return _limits(settings.login_limit, settings.login_limit_storage)


def _keys(email: str, address: str | None) -> list[tuple[RateLimitItem, str, str]]:
    limits = _current()
    return [(limits.per_account, "login-account", email.strip().lower()),
            (limits.per_address, "login-address", address or "unknown")]


def retry_after(email: str, address: str | None) -> int | None:
    """Seconds until another try is allowed, or None when one is allowed now."""
    limiter = _current().limiter
    waits = [limiter.get_window_stats(item, kind, key).reset_time - time.time()
             for item, kind, key in _keys(email, address) if not limiter.test(item, kind, key)]
    return max(1, math.ceil(max(waits))) if waits else None


def failed(email: str, address: str | None) -> None:
    """Count one failed sign-in against the account and the address."""
    limiter = _current().limiter
    for item, kind, key in _keys(email, address):
        limiter.hit(item, kind, key)


def reset() -> None:
    """Forget every count (tests; an operator can restart the web app for the same effect)."""
    _current().limiter.storage.reset()
    _limits.cache_clear()
