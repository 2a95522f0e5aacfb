"""Failed sign-ins slow down password guessing with a ladder of delays, per (account, address).

Only failures count, so a person who types their password right is never slowed. The failures
of one account *from one client address* climb a ladder (``login_limit``, default: 3 a minute,
5 in 15 minutes, 20 a day): past a rung's allowance further tries from that address are refused,
before the password is even checked, until that rung's moving window lets one through, so each
rung waits longer than the one before. One address trying many accounts climbs the same ladder
at ``ADDRESS_FACTOR`` times the allowance (a shared office NAT).

There is deliberately no lock per account alone: that would be a lock an attacker controls (five
wrong passwords from anywhere kept the real admin out for 15 minutes, forever if repeated). The
admin signing in from another address is never slowed by someone else's failures.

Counting is the ``limits`` library's moving window on the storage ``login_limit_storage`` names
(memory by default: per web process; Redis to share it between processes). The address is the
socket's peer, or what a proxy listed in ``GRPODECK_TRUSTED_PROXIES`` forwarded (``app.main``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache

from limits import RateLimitItem, parse_many, storage, strategies

from app.core.config import get_settings

ADDRESS_FACTOR = 4  # one address may try several accounts (a shared office NAT), not unboundedly


@dataclass(frozen=True)
class Limits:
    limiter: strategies.MovingWindowRateLimiter
    per_account_address: list[RateLimitItem]  # the ladder, shortest window first
    per_address: list[RateLimitItem]


@lru_cache(maxsize=4)
def _limits(spec: str, storage_url: str) -> Limits:
    ladder = sorted(parse_many(spec), key=lambda item: item.get_expiry())
    address = [type(rung)(rung.amount * ADDRESS_FACTOR, rung.multiples, rung.namespace)
               for rung in ladder]
    return Limits(strategies.MovingWindowRateLimiter(storage.storage_from_string(storage_url)),
                  ladder, address)


def _current() -> Limits:
    settings = get_settings()
    return _limits(settings.login_limit, settings.login_limit_storage)


def _keys(email: str, address: str | None) -> list[tuple[RateLimitItem, str, str]]:
    limits = _current()
    account, where = email.strip().lower(), address or "unknown"
    return ([(rung, "login-account-address", f"{account}|{where}")
             for rung in limits.per_account_address]
            + [(rung, "login-address", where) for rung in limits.per_address])


def retry_after(email: str, address: str | None) -> int | None:
    """Seconds until another try is allowed from this address, or None when one is allowed now."""
    limiter = _current().limiter
    waits = [limiter.get_window_stats(item, kind, key).reset_time - time.time()
             for item, kind, key in _keys(email, address) if not limiter.test(item, kind, key)]
    return max(1, math.ceil(max(waits))) if waits else None


def failed(email: str, address: str | None) -> None:
    """Count one failed sign-in on every rung of the account at this address and the address."""
    limiter = _current().limiter
    for item, kind, key in _keys(email, address):
        limiter.hit(item, kind, key)


def reset() -> None:
    """Forget every count (tests; an operator can restart the web app for the same effect)."""
    _current().limiter.storage.reset()
    _limits.cache_clear()
