"""Who is asking (set by ``app.auth.middleware`` on every request) and what they may do.

Runs belong to their creator: anyone logged in can see every run, but only the creator or an
admin may cancel it. Runs with no creator (before accounts, CLI imports) are the admins'.
In development mode there are no accounts and the one local user may do everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Protocol

from fastapi import Depends, HTTPException, Request, status


class Owned(Protocol):
    """What a permission check reads of a run: its id and its creator. A protocol, so accounts
    know nothing of runs: the run record stands above them (it names its creator, a user)."""

    @property
    def id(self) -> int: ...

    @property
    def created_by_id(self) -> int | None: ...


@dataclass(frozen=True)
class Identity:
    user_id: int | None = None
    email: str | None = None
    is_admin: bool = False
    dev_mode: bool = False  # login skipped: say so on every page
    via: str = "none"  # session | api_key | dev | none

    @property
    def logged_in(self) -> bool:
        return self.user_id is not None

    def manage_refusal(self, run: Owned) -> str | None:
        """Why this identity may not cancel (or otherwise change) the run; None if it may."""
        if self.is_admin or (self.dev_mode and not self.logged_in):
            return None
        if not self.logged_in:
            return "log in first"
        if run.created_by_id == self.user_id:
            return None
        if run.created_by_id is None:
            return f"run {run.id} has no owner: only an admin may change it"
        return f"run {run.id} belongs to another user: only its owner or an admin may change it"

    def owns(self, thing: Owned) -> bool:
        """True when ``thing`` (a run, a dry run) is this identity's own: its secrets (alert
        destinations) may travel into what this identity launches from it. An admin owns only
        the things with no creator; the one local user of development mode owns everything."""
        if self.dev_mode and not self.logged_in:
            return True
        if thing.created_by_id is None:
            return self.is_admin
        return thing.created_by_id == self.user_id

    def can_manage(self, run: Owned) -> bool:
        return self.manage_refusal(run) is None

    @property
    def may_administer(self) -> bool:
        """Deployment settings (alert destinations, the test alert, users) are the admins'; the
        one local user of development mode is the admin."""
        return self.is_admin or (self.dev_mode and not self.logged_in)


ANONYMOUS = Identity()


def identity_of(request: Request) -> Identity:
    return getattr(request.state, "auth", None) or ANONYMOUS


CurrentIdentity = Annotated[Identity, Depends(identity_of)]


def require_admin(request: Request) -> Identity:
    """A dependency: 403 unless the caller is an admin (deployment-wide settings)."""
    identity = identity_of(request)
    if not identity.may_administer:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            "deployment settings are for admins only" if identity.logged_in
                            else "log in as an admin first")
    return identity


AdminIdentity = Annotated[Identity, Depends(require_admin)]


def require_manage(identity: Identity, run: Owned) -> None:
    """403 with the reason when the caller may not change this run."""
    if (reason := identity.manage_refusal(run)) is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, reason)
