"""The workers' heartbeat endpoint and ``/healthz``.

``/healthz`` stays 200 while the web process answers (liveness: an orchestrator must not restart
the web app because a worker died) and reports each background process's last beat;
``/healthz?strict=1`` (both kinds) or ``?require=scheduler,worker`` answers 503 when a required
kind is silent or was never heard from, for a readiness or restart probe that should act on it.
"""

from __future__ import annotations

import hmac
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request, status
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from app.auth.local import is_local_request
from app.core.config import get_settings
from app.core.db import SessionDep, get_sessionmaker
from app.processes.service import beat, statuses
from grpodeck.contract.heartbeat import HEARTBEAT_PATH, KINDS, Heartbeat

log = logging.getLogger(__name__)
router = APIRouter(tags=["workers"])  # the worker's own secret: exempt from login (app.security)
health_router = APIRouter()


def _check_secret(request: Request, authorization: str | None) -> None:
    secret = get_settings().worker_secret
    if secret:
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(),
                                                                secret.encode()):
            raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                                "wrong or missing worker secret (Authorization: Bearer "
                                "$GRPODECK_WORKER_SECRET)")
    elif not is_local_request(request.scope):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                            "heartbeats from another machine need GRPODECK_WORKER_SECRET set on "
                            "the web app and the worker")


@router.post(HEARTBEAT_PATH, status_code=status.HTTP_204_NO_CONTENT)
def worker_heartbeat(body: Heartbeat, request: Request, db: SessionDep,
                     authorization: Annotated[str | None, Header()] = None) -> None:
    """A worker is alive (sent every ``GRPODECK_HEARTBEAT_SECONDS`` by its main process)."""
    _check_secret(request, authorization)
    beat(db, "worker", body)
    db.commit()


def _required(strict: bool, require: str | None) -> set[str]:
    wanted = set(KINDS) if strict else set()
    wanted |= {k.strip() for k in (require or "").split(",") if k.strip()}
    unknown = wanted - set(KINDS)
    if unknown:
        raise HTTPException(422,
                            f"require: unknown process kind(s) {sorted(unknown)}; known: "
                            f"{', '.join(KINDS)}")
    return wanted


@health_router.get("/healthz", include_in_schema=False)
def healthz(strict: Annotated[bool, Query()] = False,
            require: Annotated[str | None, Query()] = None) -> JSONResponse:
    wanted = _required(strict, require)
    body: dict[str, Any] = {"status": "ok"}
    try:
        with get_sessionmaker()() as db:
            found = statuses(db)
    except SQLAlchemyError as exc:  # liveness of this process does not depend on the database
        log.warning("healthz: heartbeats unreadable: %s", exc)
        body["database"] = "unavailable"
        return JSONResponse(body, status_code=503 if wanted else 200)
    body["processes"] = {k: s.to_dict() for k, s in found.items()}
    failing = sorted(k for k in wanted if found[k].stale or found[k].last_seen_at is None)
    if failing:
        body["status"], body["failing"] = "degraded", failing
    return JSONResponse(body, status_code=503 if failing else 200)
