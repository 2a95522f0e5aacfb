"""Request safety for the whole app: cross-origin protection, security headers, login."""

from __future__ import annotations

import re
from collections.abc import Iterable

from fastapi import FastAPI
from fastapi.routing import APIRoute, APIRouter

from app.auth.middleware import AuthMiddleware
from app.security.csrf import CrossOriginProtection
from app.security.headers import SecurityHeaders


def routes_of(routers: Iterable[APIRouter]) -> list[tuple[frozenset[str], re.Pattern[str]]]:
    return [(frozenset(r.methods), r.path_regex) for router in routers for r in router.routes
            if isinstance(r, APIRoute)]


def install(app: FastAPI, *, token_routers: Iterable[APIRouter],
            own_auth_routers: Iterable[APIRouter] = ()) -> None:
    """Outermost first: every response gets the headers, a cross-site post is refused before
    anything else, then the caller is identified. ``token_routers`` carry their own per-run
    token (the worker's report endpoints): no login and no origin check there.
    ``own_auth_routers`` identify their callers themselves, from headers only, answering a
    refusal in their own protocol's shape (the MLflow-compatible API); the origin check stays."""
    exempt = routes_of(token_routers)
    app.add_middleware(AuthMiddleware, exempt=[*exempt, *routes_of(own_auth_routers)])
    app.add_middleware(CrossOriginProtection, exempt=exempt)
    app.add_middleware(SecurityHeaders)
