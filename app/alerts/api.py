"""JSON: ``GET /api/alerts?state=open|resolved|all``, ``POST /api/alerts/{id}/ack``, mutes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request, status
from pydantic import BaseModel, Field
from sqlalchemy import select

from app.alerts import outbox, service
from app.alerts.models import Alert
from app.auth.identity import CurrentIdentity, require_manage
from app.core.db import SessionDep
from app.runs.models import Run
from app.runs.service import get_run
from grpodeck.contract.alerts import masked

router = APIRouter(prefix="/api/alerts", tags=["alerts"])

Severity = Literal["info", "warning", "critical"]


def who(request: Request) -> str | None:
    """The signed-in person's name once accounts exist (``request.state.user``), else None."""
    user = getattr(request.state, "user", None)
    name = getattr(user, "name", None) or getattr(user, "username", None) or getattr(
        user, "email", None)
    return str(name)[:200] if name else None


def alerts_json(db: SessionDep, alerts: list[Alert]) -> list[dict[str, Any]]:
    names = dict(db.execute(select(Run.id, Run.name).where(
        Run.id.in_({a.run_id for a in alerts}))).all()) if alerts else {}
    jobs = outbox.deliveries_for(db, alerts)
    mutes = service.mutes_by_run(db, list(names))
    out = []
    for a in alerts:
        muted = bool(mutes.get(a.run_id, set()) & {"", a.category})
        item = service.to_dict(a, names.get(a.run_id), jobs.get(a.id, []), muted)
        for d, job in zip(item["deliveries"], jobs.get(a.id, []), strict=True):
            d["destination"] = masked(job.destination)
        out.append(item)
    return out


@router.get("")
def list_alerts(db: SessionDep, state: Literal["open", "resolved", "all"] = "open",
                severity: Severity | None = None,
                run_id: Annotated[int | None, Query(ge=1, lt=2**31)] = None,
                limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> list[dict[str, Any]]:
    """Alerts newest first, each with its run, category, severity, steps, times, severity
    history and every delivery (status, attempts, last error)."""
    return alerts_json(db, list(service.list_alerts(db, state=state, severity=severity,
                                                    run_id=run_id, limit=limit)))


@router.get("/count")
def count(db: SessionDep) -> dict[str, int]:
    """Open alerts nobody acknowledged yet (what the bell shows)."""
    return {"open_unacknowledged": service.open_unacknowledged(db)}


def run_of(db: SessionDep, alert: Alert) -> Run:
    run = db.get(Run, alert.run_id)
    if run is None:  # the alert's run is gone (cascade): nothing to act on
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {alert.run_id} not found")
    return run


def alert_or_404(db: SessionDep, alert_id: int) -> Alert:
    alert = db.get(Alert, alert_id) if 0 < alert_id < 2**31 else None  # ids a column holds
    if alert is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"alert {alert_id} not found")
    return alert


@router.post("/{alert_id}/ack")
def acknowledge(alert_id: int, request: Request, db: SessionDep,
                identity: CurrentIdentity) -> dict[str, Any]:
    """Acknowledge: no more escalation messages for this alert (its resolution is still sent).
    Only the run's owner or an admin (403 otherwise)."""
    alert = alert_or_404(db, alert_id)
    require_manage(identity, run_of(db, alert))
    service.acknowledge(db, alert, who(request))
    db.commit()
    return alerts_json(db, [alert])[0]


class MuteIn(BaseModel):
    run_id: int = Field(ge=1, lt=2**31)
    category: str = Field("", max_length=40, pattern=r"^[a-z_]*$",
                          description="a finding category; empty mutes the whole run")
    muted: bool = True


@router.post("/mutes")
def set_mute(body: MuteIn, request: Request, db: SessionDep,
             identity: CurrentIdentity) -> dict[str, Any]:
    """Mute (or unmute) a run or one category on a run: alerts are kept, nobody is messaged.
    Only the run's owner or an admin (403 otherwise)."""
    if (run := get_run(db, body.run_id)) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"run {body.run_id} not found")
    require_manage(identity, run)
    if body.muted:
        service.mute(db, body.run_id, body.category, who(request))
    else:
        service.unmute(db, body.run_id, body.category)
    db.commit()
    return {"run_id": body.run_id, "category": body.category, "muted": body.muted}
