"""Login, logout and the account page (API keys). Pages in the site's layout; every post is
covered by the cross-origin protection (``app.security.csrf``)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.auth import service, throttle
from app.auth.identity import CurrentIdentity, Identity
from app.auth.middleware import SESSION_COOKIE
from app.auth.models import User
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates

router = APIRouter(include_in_schema=False)


def safe_next(target: str | None) -> str:
    """Only a path on this site: ``//evil.example`` or ``https://...`` would be an open redirect."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/runs"
    return target


def _secure(request: Request) -> bool:
    return get_settings().public_url.startswith("https://") or request.url.scheme == "https"


def _login_page(request: Request, db: SessionDep, *, next_url: str, email: str = "",
                error: str | None = None, status_code: int = 200) -> Response:
    return templates.TemplateResponse(
        request, "auth/login.html", {"next": next_url, "email": email, "error": error,
                                     "no_accounts": not service.any_users(db)},
        status_code=status_code)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, db: SessionDep, identity: CurrentIdentity,
               next: str | None = None) -> Response:
    if identity.logged_in or identity.via == "dev":
        return RedirectResponse(safe_next(next), status_code=303)
    return _login_page(request, db, next_url=safe_next(next))


@router.post("/login", response_class=HTMLResponse)
def login(request: Request, db: SessionDep, email: Annotated[str, Form(max_length=254)],
          password: Annotated[str, Form(max_length=4096)],
          next: Annotated[str, Form(max_length=2048)] = "/runs") -> Response:
    address = request.client.host if request.client else None
    if (wait := throttle.retry_after(email, address)) is not None:
        response = _login_page(request, db, next_url=safe_next(next), email=email,
                               error=f"too many failed sign-ins; try again in "
                                     f"{math.ceil(wait / 60)} min", status_code=429)
        response.headers["Retry-After"] = str(wait)
        return response
    user = service.authenticate(db, email=email, password=password)
    if user is None:
        throttle.failed(email, address)
        return _login_page(request, db, next_url=safe_next(next), email=email,
                           error="wrong email or password", status_code=401)
    session_id = service.start_session(db, user, days=get_settings().session_days)
    db.commit()
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(SESSION_COOKIE, session_id, httponly=True, samesite="lax",
                        secure=_secure(request), path="/",
                        max_age=int(get_settings().session_days * 86400))
    return response


@router.post("/logout")
def logout(request: Request, db: SessionDep) -> Response:
    if session_id := request.cookies.get(SESSION_COOKIE):
        service.end_session(db, session_id)
        db.commit()
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax",
                           secure=_secure(request))
    return response


def _account(request: Request, db: SessionDep, identity: Identity, *, status_code: int = 200,
             **extra: Any) -> Response:
    user = db.get(User, identity.user_id) if identity.user_id is not None else None
    keys = service.api_keys_of(db, user.id) if user else []
    return templates.TemplateResponse(request, "auth/account.html",
                                      {"user": user, "keys": keys, "new_key": None,
                                       "error": None, **extra},
                                      status_code=status_code)


@router.get("/account", response_class=HTMLResponse)
def account(request: Request, db: SessionDep, identity: CurrentIdentity) -> Response:
    return _account(request, db, identity)


@router.post("/account/keys", response_class=HTMLResponse)
def create_key(request: Request, db: SessionDep, identity: CurrentIdentity,
               name: Annotated[str, Form(max_length=80)] = "") -> Response:
    user = db.get(User, identity.user_id) if identity.user_id is not None else None
    if user is None:
        return _account(request, db, identity, status_code=403,
                        error="API keys belong to accounts: log in first")
    row, key = service.create_api_key(db, user, name=name)
    db.commit()
    return _account(request, db, identity, new_key=key, new_key_name=row.name, status_code=201)


@router.post("/account/keys/{key_id}/revoke", response_class=HTMLResponse)
def revoke_key(key_id: int, request: Request, db: SessionDep,
               identity: CurrentIdentity) -> Response:
    if identity.user_id is None:
        return _account(request, db, identity, status_code=403, error="log in first")
    try:
        service.revoke_api_key(db, user_id=identity.user_id, key_id=key_id)
    except service.AccountError as exc:
        return _account(request, db, identity, status_code=404, error=str(exc))
    db.commit()
    return RedirectResponse("/account", status_code=303)
