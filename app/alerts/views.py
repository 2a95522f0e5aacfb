"""Pages: the bell (every page), ``/alerts`` across runs, ``/settings/alerts``.

Buttons are plain forms that POST and redirect back (no inline scripts, same origin)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select

from app.alerts import egress, outbox, service
from app.alerts.api import alert_or_404, alerts_json, run_of, who
from app.alerts.models import DEAD, PENDING, SENDING, SENT, Alert, AlertConfig, Delivery
from app.alerts.rules import split_urls
from app.auth.identity import AdminIdentity, CurrentIdentity, Identity, require_manage
from app.core.config import get_settings
from app.core.db import SessionDep
from app.core.templating import templates
from app.runs.models import Run
from grpodeck.contract.alerts import masked, unmask

router = APIRouter(include_in_schema=False)

STATES = ("open", "resolved", "all")
SEVERITIES = ("critical", "warning", "info")
# what an admin reads for a delivery's outbox status
DELIVERY_WORDS = {PENDING: "pending", SENDING: "sending", SENT: "delivered", DEAD: "failed"}


def _back(target: str | None) -> str:
    """Only our own alert pages are valid places to return to."""
    return target if target and target.startswith("/alerts") and "//" not in target else "/alerts"


@router.get("/alerts/_bell", response_class=HTMLResponse)
def bell(request: Request, db: SessionDep) -> Response:
    return templates.TemplateResponse(request, "alerts/_bell.html",
                                      {"count": service.open_unacknowledged(db)})


def manageable(db: SessionDep, identity: Identity, run_ids: set[int]) -> set[int]:
    """The runs whose alerts this person may acknowledge and mute (the page shows the buttons
    only there; the routes refuse the rest with 403)."""
    runs = db.scalars(select(Run).where(Run.id.in_(run_ids))).all() if run_ids else []
    return {r.id for r in runs if identity.can_manage(r)}


def runs_with_alerts(db: SessionDep) -> list[Any]:
    """The run filter's choices: only runs that have an alert (every run made a long list of
    runs that filter to nothing), newest first."""
    alerted = select(Alert.run_id).distinct()
    return list(db.execute(select(Run.id, Run.name).where(Run.id.in_(alerted))
                           .order_by(Run.id.desc())).all())


@router.get("/alerts", response_class=HTMLResponse)
def alerts_page(request: Request, db: SessionDep, identity: CurrentIdentity,
                state: str = "open", severity: str = "",
                run: str = "") -> Response:
    state = state if state in STATES else "open"
    severity = severity if severity in SEVERITIES else ""
    run_id = int(run) if run.isascii() and run.isdigit() and 0 < int(run) < 2**31 else None
    alerts = alerts_json(db, list(service.list_alerts(
        db, state=state, severity=severity or None, run_id=run_id)))
    runs = runs_with_alerts(db)
    mutes = service.mutes_by_run(db, [r.id for r in runs])
    return templates.TemplateResponse(request, "alerts/list.html", {
        "alerts": alerts, "state": state, "severity": severity, "run_id": run_id,
        "runs": runs, "mutes": mutes,
        "manageable": manageable(db, identity, {a["run_id"] for a in alerts}),
        "here": str(request.url.path) + (
            f"?{request.url.query}" if request.url.query else "")})


@router.post("/alerts/{alert_id}/ack")
def ack_button(alert_id: int, request: Request, db: SessionDep, identity: CurrentIdentity,
               next: Annotated[str | None, Form()] = None) -> Response:
    alert = alert_or_404(db, alert_id)
    require_manage(identity, run_of(db, alert))
    service.acknowledge(db, alert, who(request))
    db.commit()
    return RedirectResponse(_back(next), status_code=303)


@router.post("/alerts/mute")
def mute_button(request: Request, db: SessionDep, identity: CurrentIdentity,
                run_id: Annotated[int, Form(ge=1, lt=2**31)],
                category: Annotated[str, Form(max_length=40, pattern=r"^[a-z_]*$")] = "",
                muted: Annotated[str, Form()] = "1",
                next: Annotated[str | None, Form()] = None) -> Response:
    if (run := db.get(Run, run_id)) is not None:
        require_manage(identity, run)
        if muted == "1":
            service.mute(db, run_id, category, who(request))
        else:
            service.unmute(db, run_id, category)
        db.commit()
    return RedirectResponse(_back(next), status_code=303)


def saved_urls(db: SessionDep) -> list[str]:
    saved = db.get(AlertConfig, 1)
    return list(saved.urls) if saved else []


def _settings_context(db: SessionDep, **extra: Any) -> dict[str, Any]:
    """Every destination masked (scheme and host): even an admin's page never echoes a secret."""
    tests = db.scalars(select(Delivery).where(Delivery.event == "test")
                       .order_by(Delivery.id.desc()).limit(10)).all()
    return {"env_urls": [masked(u) for u in split_urls(get_settings().alert_urls)],
            "saved": "\n".join(masked(u) for u in saved_urls(db)), "tests": tests,
            "privacy": masked, "delivery_words": DELIVERY_WORDS, "errors": [], "notice": None,
            "destination_count": len(outbox.deployment_urls(db)), **extra}


@router.get("/settings/alerts", response_class=HTMLResponse)
def settings_page(request: Request, db: SessionDep, admin: AdminIdentity) -> Response:
    return templates.TemplateResponse(request, "alerts/settings.html", _settings_context(db))


@router.post("/settings/alerts", response_class=HTMLResponse)
def save_settings(request: Request, db: SessionDep, admin: AdminIdentity,
                  urls: Annotated[str, Form(max_length=20_000)] = "") -> Response:
    """A masked line left as shown keeps the stored URL it stands for; every other line must
    pass the outbound URL policy (``app.alerts.egress``)."""
    wanted = unmask(split_urls(urls), saved_urls(db))
    errors = [f"line {i}: {problem}" for i, url in enumerate(wanted, 1)
              if (problem := egress.destination_refusal(url))]
    if len(wanted) > 20:
        errors.append("at most 20 destinations")
    if errors:  # nothing saved; the text comes back as typed
        return templates.TemplateResponse(request, "alerts/settings.html", _settings_context(
            db, saved=urls, errors=errors), status_code=422)  # as typed: masked lines stay so
    saved = db.get(AlertConfig, 1) or AlertConfig(id=1, urls=[])
    saved.urls, saved.updated_at = wanted, datetime.now(UTC)
    db.add(saved)
    db.commit()
    return templates.TemplateResponse(request, "alerts/settings.html", _settings_context(
        db, notice=f"Saved {len(wanted)} destination(s)."))


@router.get("/settings/alerts/_tests", response_class=HTMLResponse)
def test_deliveries(request: Request, db: SessionDep, admin: AdminIdentity) -> Response:
    """The test deliveries' table alone, polled while one waits for the scheduler."""
    return templates.TemplateResponse(request, "alerts/_test_deliveries.html",
                                      _settings_context(db))


@router.post("/settings/alerts/test", response_class=HTMLResponse)
def send_test(request: Request, db: SessionDep, admin: AdminIdentity) -> Response:
    sent = service.send_test(db)
    db.commit()
    notice = (f"Test alert queued for {sent} destination(s); the scheduler sends it within "
              "seconds (status below)." if sent else "No destinations configured yet.")
    if request.headers.get("hx-request") == "true":  # the button's own panel, result inline
        return templates.TemplateResponse(request, "alerts/_test_alert.html",
                                          _settings_context(db, test_result=notice))
    return templates.TemplateResponse(request, "alerts/settings.html",
                                      _settings_context(db, notice=notice))





def _bell_seconds() -> float:
    return max(1.0, get_settings().live_refresh_seconds)


templates.env.globals["bell_seconds"] = _bell_seconds
