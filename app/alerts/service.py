"""Alert lifecycle, derived from the transitions ``health.service.store()`` reports.

* A finding reaching a severity the run's rules care about opens an alert (or reopens the same
  condition's alert if it resolved less than ``alert_reopen_seconds`` ago).
* Later transitions update it (severity history; escalations are messaged, easing is only
  recorded) and every batch refreshes its step range and evidence from the finding.
* It resolves when the finding resolves (or drops below the rules' minimum severity), and when
  the run ends: the condition cannot go on in a finished run. A ``lost`` alert stays open on a
  failed run: someone has to look at the worker.
Every change that someone should hear about writes outbox jobs in the caller's transaction.
Functions flush, never commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.alerts import messages, outbox
from app.alerts.models import OPEN, RESOLVED, Alert, AlertMute
from app.alerts.rules import rules_of
from app.core.config import get_settings
from app.diagnostics.model import severity_rank
from app.health.models import FindingRecord, Stored
from app.runs import lifecycle
from app.runs.models import Run
from grpodeck.contract.alerts import AlertRules

LOST = "lost"
LOST_ACTION = "Check the worker process and its logs (crashed, OOM-killed, or hung?)"

FOUND_AT_END = "found_at_end"  # first confirmed by the final evaluation: resolved at once
Event = tuple[Alert, str]  # (alert, opened | escalated | reopened | resolved | found_at_end)


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def open_alerts(db: Session, run_id: int) -> dict[str, Alert]:
    """The run's open alerts by category: an alert's identity is (run, category); the metric
    is evidence (issue 23: a length problem that moves from completions/mean_length to
    completions/clipped_ratio is one alert, never resolved and reopened)."""
    found = db.scalars(select(Alert).where(Alert.run_id == run_id, Alert.state == OPEN)
                       .order_by(Alert.id)).all()
    return {a.category: a for a in found}


def _worst(records: Sequence[FindingRecord]) -> FindingRecord:
    """The record an alert of several findings of one category shows: the most severe, then
    the latest."""
    return max(records, key=lambda r: (severity_rank(r.severity), r.last_step, r.id or 0))


def _history(alert: Alert, event: str, severity: str | None, step: int, now: datetime) -> None:
    alert.history = [*(alert.history or []), {"event": event, "severity": severity,
                                              "step": step, "at": now.isoformat()}]


def _sync(alert: Alert, record: FindingRecord, now: datetime) -> None:
    """The alert shows the finding's current severity, step range and evidence: the severity
    a person reads on ``/alerts`` is the one the run page shows for that finding (issue 34: an
    alert resolved at the run's end kept the severity it had before the final evaluation)."""
    alert.severity = record.severity
    alert.finding_id, alert.metric_key = record.id, record.metric_key
    alert.first_step, alert.last_step = record.first_step, record.last_step
    alert.summary, alert.evidence = record.summary, record.evidence or {}
    alert.action = (record.actions or [None])[0]
    alert.updated_at = now


def _open(db: Session, run: Run, record: FindingRecord, severity: str, now: datetime) -> Event:
    """A new alert, or the same condition's alert reopened when it resolved recently."""
    latest = db.scalars(select(Alert).where(
        Alert.run_id == run.id, Alert.category == record.category
    ).order_by(Alert.id.desc()).limit(1)).first()
    window = timedelta(seconds=get_settings().alert_reopen_seconds)
    resolved_at = _aware(latest.resolved_at) if latest else None
    if latest is not None and resolved_at is not None and now - resolved_at <= window:
        alert, event = latest, "reopened"
        alert.state, alert.resolved_at, alert.resolved_reason = OPEN, None, None
        alert.acknowledged_at = alert.acknowledged_by = None  # a new episode needs a new look
    else:
        alert, event = Alert(run_id=run.id, category=record.category,
                             metric_key=record.metric_key, state=OPEN, opened_at=now,
                             history=[]), "opened"
        db.add(alert)
    alert.severity = severity
    _sync(alert, record, now)
    _history(alert, event, severity, record.last_step, now)
    return alert, event


def _resolve(alert: Alert, now: datetime, reason: str) -> Event:
    alert.state, alert.resolved_at, alert.resolved_reason, alert.updated_at = \
        RESOLVED, now, reason, now
    _history(alert, "resolved", None, alert.last_step, now)
    return alert, "resolved"


def on_findings(db: Session, run: Run, stored: Stored, now: datetime) -> None:
    """Open, update and resolve the run's alerts from one ``store()``'s transitions."""
    if not lifecycle.reports_live(run):
        return
    rules = rules_of(run.spec)
    if not lifecycle.is_live(run):
        current = open_alerts(db, run.id)
        _sync_all(current, _by_category(stored.active), now)  # the final word, then resolved
        found = _found_at_end(db, run, stored, rules, current, now)
        _notify(db, run, [*resolve_ended(run, current, now), *found], now)
        return
    current = open_alerts(db, run.id) if stored.changes or stored.active else {}
    shown = _by_category(r for r in stored.active if rules.cares(r.category, r.severity))
    events: list[Event] = []
    for category in sorted({c.record.category for c in stored.changes}):
        event = _follow(db, run, current, category, shown.get(category), now,
                        below=[r.severity for r in stored.active if r.category == category])
        if event is not None:
            events.append(event)
    _sync_all(current, shown, now)
    _notify(db, run, events, now)


def _by_category(records: Iterable[FindingRecord]) -> dict[str, list[FindingRecord]]:
    grouped: dict[str, list[FindingRecord]] = {}
    for r in records:
        grouped.setdefault(r.category, []).append(r)
    return grouped


def _sync_all(current: dict[str, Alert], shown: dict[str, list[FindingRecord]],
              now: datetime) -> None:
    """Each open alert shows the worst of its category's shown findings; a severity that moves
    here (the final evaluation of an ended run) is recorded, not messaged."""
    for category, alert in current.items():
        if category in shown:
            worst = _worst(shown[category])
            if alert.severity and worst.severity != alert.severity:
                rising = severity_rank(worst.severity) > severity_rank(alert.severity)
                _history(alert, "escalated" if rising else "eased", worst.severity,
                         worst.last_step, now)
            _sync(alert, worst, now)


def _follow(db: Session, run: Run, current: dict[str, Alert], category: str,
            records: list[FindingRecord] | None, now: datetime, below: list[str]
            ) -> Event | None:
    """Bring one category's alert in line with its shown findings (those the rules care
    about): open it, move its severity to the worst of them, or resolve it when none is left.
    Returns the event to message, if any (easing is only recorded); ``below``: the severities
    of the category's findings still shown, none of which the rules care about."""
    alert = current.get(category)
    if records:
        worst = _worst(records)
        if alert is None:
            alert, event = _open(db, run, worst, worst.severity, now)
            current[category] = alert
            return alert, event
        if worst.severity == alert.severity:
            return None
        rising = severity_rank(worst.severity) > severity_rank(alert.severity)
        alert.severity = worst.severity
        _history(alert, "escalated" if rising else "eased", alert.severity, worst.last_step, now)
        return (alert, "escalated") if rising and alert.acknowledged_at is None else None
    if alert is None:
        return None
    del current[category]
    if below:  # the finding still shows, at the severity the run page shows it
        alert.severity = max(below, key=severity_rank)
    why = (f"eased to {alert.severity}, below this run's minimum" if below
           else "finding resolved")
    return _resolve(alert, now, why)


def _found_at_end(db: Session, run: Run, stored: Stored, rules: AlertRules,
                  current: dict[str, Alert], now: datetime) -> list[Event]:
    """Findings first confirmed by the evaluation at the run's end (a short run, or a problem
    only the final steps made certain): the person who launched it still hears, once, as
    ``found_at_end`` on an alert that is already resolved: the condition is not ongoing."""
    events: list[Event] = []
    seen = set(current)  # one alert per category, also among those found at the end
    for change in stored.changes:
        record = change.record
        if change.after is None or record.category in seen or not rules.cares(
                record.category, change.after):
            continue
        alert = Alert(run_id=run.id, category=record.category, metric_key=record.metric_key,
                      state=RESOLVED, opened_at=now, resolved_at=now, severity=change.after,
                      resolved_reason=f"found when the run {run.status}", history=[])
        db.add(alert)
        _sync(alert, record, now)
        _history(alert, FOUND_AT_END, change.after, record.last_step, now)
        events.append((alert, FOUND_AT_END))
        seen.add(record.category)
    return events


def resolve_ended(run: Run, current: dict[str, Alert], now: datetime
                  ) -> list[Event]:
    """A run that ended has no ongoing condition: its open alerts resolve, except ``lost``."""
    return [_resolve(alert, now, f"run {run.status}")
            for alert in current.values() if alert.category != LOST]


def run_lost(db: Session, run: Run, reason: str, now: datetime | None = None) -> None:
    """The lost-run check failed ``run``: a critical ``lost`` alert, opened or escalated."""
    now = now or datetime.now(UTC)
    if not lifecycle.reports_live(run) or not rules_of(run.spec).cares(LOST, "critical"):
        return
    alert = open_alerts(db, run.id).get(LOST)
    record = db.scalars(select(FindingRecord).where(
        FindingRecord.run_id == run.id, FindingRecord.category == LOST)).first()
    if alert is None:
        alert = Alert(run_id=run.id, category=LOST, metric_key="", state=OPEN, opened_at=now,
                      history=[], severity="critical", first_step=run.current_step or 0,
                      last_step=run.current_step or 0, summary=reason,
                      evidence={"status": run.status, "last_step": run.current_step or 0},
                      action=LOST_ACTION, finding_id=record.id if record else None,
                      updated_at=now)
        db.add(alert)
        _history(alert, "opened", "critical", alert.last_step, now)
        _notify(db, run, [(alert, "opened")], now)
    elif alert.severity != "critical":
        alert.severity, alert.summary, alert.updated_at = "critical", reason, now
        _history(alert, "escalated", "critical", alert.last_step, now)
        _notify(db, run, [(alert, "escalated")], now)


def muted_categories(db: Session, run_id: int) -> set[str]:
    """Muted categories of a run; "" means the whole run is muted."""
    return set(db.scalars(select(AlertMute.category).where(AlertMute.run_id == run_id)))


def _notify(db: Session, run: Run, events: Sequence[Event], now: datetime) -> None:
    """One outbox job per destination for everything that changed together on this run."""
    if not events:
        return
    muted = muted_categories(db, run.id)
    if "" in muted:
        return
    events = [(a, e) for a, e in events if a.category not in muted]
    if not events:
        return
    db.flush()  # alert ids
    base = get_settings().public_url
    entries = [messages.alert_dict(a, run, e, base, now) for a, e in events]
    kinds = {e for _, e in events}
    outbox.enqueue(db, run, kinds.pop() if len(kinds) == 1 else "changes",
                   [a.id for a, _ in events], messages.run_message(run, entries))


def acknowledge(db: Session, alert: Alert, by: str | None = None,
                now: datetime | None = None) -> None:
    if alert.acknowledged_at is None:
        alert.acknowledged_at, alert.acknowledged_by = now or datetime.now(UTC), by


def mute(db: Session, run_id: int, category: str = "", by: str | None = None) -> AlertMute:
    found = db.scalars(select(AlertMute).where(AlertMute.run_id == run_id,
                                               AlertMute.category == category)).first()
    if found is None:
        found = AlertMute(run_id=run_id, category=category, created_by=by,
                          created_at=datetime.now(UTC))
        db.add(found)
        db.flush()
    return found


def unmute(db: Session, run_id: int, category: str = "") -> None:
    for found in db.scalars(select(AlertMute).where(AlertMute.run_id == run_id,
                                                    AlertMute.category == category)):
        db.delete(found)


def open_unacknowledged(db: Session) -> int:
    """What the bell counts."""
    return db.scalar(select(func.count()).select_from(Alert).where(
        Alert.state == OPEN, Alert.acknowledged_at.is_(None))) or 0


def list_alerts(db: Session, *, state: str = "open", severity: str | None = None,
                run_id: int | None = None, limit: int = 500) -> Sequence[Alert]:
    stmt = select(Alert)
    if state in (OPEN, RESOLVED):
        stmt = stmt.where(Alert.state == state)
    if severity:
        stmt = stmt.where(Alert.severity == severity)
    if run_id is not None:
        stmt = stmt.where(Alert.run_id == run_id)
    return db.scalars(stmt.order_by(Alert.updated_at.desc(), Alert.id.desc()).limit(limit)).all()


def mutes_by_run(db: Session, run_ids: Sequence[int]) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    if run_ids:
        for m in db.scalars(select(AlertMute).where(AlertMute.run_id.in_(list(run_ids)))):
            found.setdefault(m.run_id, set()).add(m.category)
    return found


def send_test(db: Session, now: datetime | None = None) -> int:
    """A test message to every deployment-wide destination, through the outbox and sender."""
    now = now or datetime.now(UTC)
    urls = outbox.deployment_urls(db)
    outbox.enqueue(db, None, "test", [], messages.test_message(get_settings().public_url, now),
                   urls=urls)
    return len(urls)


def to_dict(alert: Alert, run_name: str | None, jobs: Sequence[Any],
            muted: bool = False) -> dict[str, Any]:
    """The JSON API's view of one alert with its deliveries."""
    return {"id": alert.id, "run_id": alert.run_id, "run_name": run_name,
            "category": alert.category, "metric": alert.metric, "severity": alert.severity,
            "state": alert.state, "first_step": alert.first_step, "last_step": alert.last_step,
            "summary": alert.summary, "evidence": alert.evidence, "action": alert.action,
            "history": alert.history, "opened_at": alert.opened_at,
            "updated_at": alert.updated_at, "resolved_at": alert.resolved_at,
            "resolved_reason": alert.resolved_reason,
            "acknowledged_at": alert.acknowledged_at, "acknowledged_by": alert.acknowledged_by,
            "muted": muted, "finding_id": alert.finding_id, "links": messages.links(alert, ""),
            "deliveries": [{"id": j.id, "destination": j.destination_key, "event": j.event,
                            "status": j.status, "attempts": j.attempts,
                            "last_error": j.last_error, "created_at": j.created_at,
                            "sent_at": j.sent_at} for j in jobs]}
