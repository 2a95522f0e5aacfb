"""What a message says: the same content as text (Apprise title/body) and as the documented
JSON payload (``webhook+https://``). Built when the job is written, so a message says what was
true when the alert changed, even if it is delivered later."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.alerts.models import Alert
from app.core.templating import duration
from app.health.evidence_words import evidence_line
from app.health.links import finding_links
from app.runs.models import Run

EVIDENCE_ITEMS = 4  # the main evidence numbers a message carries
SCHEMA = "grpodeck.alerts/1"
_ORDER = {"critical": 0, "warning": 1, "info": 2}


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def lasted(alert: Alert, now: datetime) -> float | None:
    start = _aware(alert.opened_at)
    end = _aware(alert.resolved_at) or now
    return None if start is None else max(0.0, (end - start).total_seconds())


def links(alert: Alert, base_url: str) -> dict[str, str]:
    """The finding's places (``app.health.links``): the run page at it, the charts zoomed to
    the alert's step range, and the rollouts at its last step."""
    return finding_links(alert.run_id, alert.finding_id, alert.first_step, alert.last_step,
                         base_url)


def alert_dict(alert: Alert, run: Run, event: str, base_url: str, now: datetime
               ) -> dict[str, Any]:
    evidence = dict(list((alert.evidence or {}).items())[:EVIDENCE_ITEMS])
    return {"id": alert.id, "event": event, "run_id": run.id, "run_name": run.name,
            "category": alert.category, "metric": alert.metric, "severity": alert.severity,
            "first_step": alert.first_step, "last_step": alert.last_step,
            "summary": alert.summary, "evidence": evidence, "action": alert.action,
            "opened_at": _aware(alert.opened_at).isoformat() if alert.opened_at else None,
            "resolved_at": _aware(alert.resolved_at).isoformat() if alert.resolved_at else None,
            "resolved_reason": alert.resolved_reason,
            "duration_seconds": round(lasted(alert, now) or 0.0, 1) if event == "resolved"
            else None,
            **links(alert, base_url)}


def _line(a: dict[str, Any]) -> str:
    title = a["category"].replace("_", " ") + (f" ({a['metric']})" if a["metric"] else "")
    if a["event"] == "resolved":
        why = f" ({a['resolved_reason']})" if a.get("resolved_reason") else ""
        return (f"[RESOLVED] {title} on run \"{a['run_name']}\": lasted "
                f"{duration(a['duration_seconds'])}{why}, steps {a['first_step']}-"
                f"{a['last_step']}.\n{a['url']}")
    head = {"opened": "", "escalated": " (escalated)", "reopened": " (back again)",
            "found_at_end": " (found when the run ended)"}.get(
        a["event"], f" ({a['event']})")
    numbers = evidence_line(a["evidence"])  # words, as the pages show them
    text = (f"[{a['severity'].upper()}]{head} {title} on run \"{a['run_name']}\", steps "
            f"{a['first_step']}-{a['last_step']}\n{a['summary']}")
    if numbers:
        text += f"\nEvidence: {numbers}"
    if a["action"]:
        text += f"\nFirst thing to try: {a['action']}"
    return text + f"\n{a['url']}"


def worst(alerts: Sequence[dict[str, Any]]) -> str:
    live = [a for a in alerts if a["event"] != "resolved"]
    if not live:
        return "resolved"
    return min((a["severity"] for a in live), key=lambda s: _ORDER.get(s, 3))


def run_message(run: Run, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One message for everything that changed together on one run (grouping)."""
    entries = sorted(entries, key=lambda a: (a["event"] == "resolved",
                                             _ORDER.get(a["severity"], 3)))
    level = worst(entries)
    what = ", ".join(a["category"].replace("_", " ") for a in entries)
    verb = "resolved" if level == "resolved" else level
    title = f"GRPO Deck: {verb} on run \"{run.name}\": {what}"
    return {"schema": SCHEMA, "kind": "alerts", "title": title[:250], "severity": level,
            "text": "\n\n".join(_line(a) for a in entries),
            "runs": [{"id": run.id, "name": run.name}], "alerts": list(entries)}


def digest(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Many runs alerting at once: one message listing them all (rate limit)."""
    alerts = [a for m in messages for a in m["alerts"]]
    runs = {r["id"]: r for m in messages for r in m["runs"]}
    level = worst(alerts)
    lines = [f"- run \"{a['run_name']}\": {a['event']} {a['severity']} "
             f"{a['category'].replace('_', ' ')}, steps {a['first_step']}-{a['last_step']}: "
             f"{a['url']}" for a in alerts]
    return {"schema": SCHEMA, "kind": "digest", "severity": level,
            "title": f"GRPO Deck: {len(alerts)} alert changes on {len(runs)} runs",
            "text": "\n".join(lines), "runs": list(runs.values()), "alerts": alerts}


def test_message(base_url: str, now: datetime) -> dict[str, Any]:
    return {"schema": SCHEMA, "kind": "test", "severity": "info",
            "title": "GRPO Deck: test alert",
            "text": f"A test alert sent at {now.isoformat(timespec='seconds')} from "
                    f"{base_url.rstrip('/')}/settings/alerts. If you read this, alerts reach "
                    "you here.", "runs": [], "alerts": []}
