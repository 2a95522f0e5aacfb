"""Record heartbeats and judge whether the scheduler and the workers are still alive.

Which silence is reported (the banner and ``/healthz``): a kind of process that beat once and
then fell silent for ``heartbeat_stale_seconds``, or one the deployment expects
(``GRPODECK_EXPECT_PROCESSES``, set by ``grpodeck up``) that has not beaten within that long of
the web app's start. A stack that never ran a scheduler (a bare ``serve`` with workers only, the
browser tests) is not told that its alerts are undelivered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.config import get_settings
from app.processes.models import HeartbeatRecord
from grpodeck.contract.heartbeat import KINDS, Heartbeat, ProcessKind

WEB_STARTED_AT = datetime.now(UTC)
MESSAGES: dict[str, str] = {
    "scheduler": "The scheduler is not running: alerts are not being delivered and lost runs "
                 "are not detected.",
    "worker": "No worker is running: queued runs and dry runs wait.",
}
CACHE_SECONDS = 3.0


def beat(db: Session, kind: ProcessKind, heartbeat: Heartbeat) -> None:
    """Insert or refresh the row of (kind, name); the caller commits."""
    now = datetime.now(UTC)
    row = db.scalar(select(HeartbeatRecord).where(HeartbeatRecord.kind == kind,
                                                  HeartbeatRecord.name == heartbeat.name))
    if row is None:
        try:
            with db.begin_nested():
                db.add(HeartbeatRecord(kind=kind, name=heartbeat.name, host=heartbeat.host,
                                       pid=heartbeat.pid, started_at=now, last_seen_at=now))
            return
        except IntegrityError:  # the same process's previous beat won a race: update it
            row = db.scalar(select(HeartbeatRecord).where(HeartbeatRecord.kind == kind,
                                                          HeartbeatRecord.name == heartbeat.name))
    assert row is not None
    if row.pid != heartbeat.pid:  # a restarted process under the same name
        row.started_at, row.pid = now, heartbeat.pid
    row.host, row.last_seen_at = heartbeat.host, now


@dataclass(frozen=True)
class KindStatus:
    kind: str
    last_seen_at: datetime | None
    stale: bool  # reported: beat once then fell silent, or expected and never heard from

    def to_dict(self) -> dict[str, object]:
        seen = self.last_seen_at.isoformat() if self.last_seen_at else None
        return {"last_seen_at": seen, "stale": self.stale}


def _aware(value: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes (stored in UTC)."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def expected_kinds() -> set[str]:
    return {k.strip() for k in get_settings().expect_processes.split(",") if k.strip()}


def statuses(db: Session) -> dict[str, KindStatus]:
    """Per kind: the latest beat of any process of that kind and whether to report it."""
    limit = timedelta(seconds=get_settings().heartbeat_stale_seconds)
    now = datetime.now(UTC)
    latest = dict(db.execute(select(HeartbeatRecord.kind, func.max(HeartbeatRecord.last_seen_at))
                             .group_by(HeartbeatRecord.kind)).all())
    expected = expected_kinds()
    out: dict[str, KindStatus] = {}
    for kind in KINDS:
        seen = _aware(latest.get(kind))
        since = seen
        if kind in expected:  # a grace after this web app starts, for its children to beat
            since = max(seen, WEB_STARTED_AT) if seen else WEB_STARTED_AT
        out[kind] = KindStatus(kind, seen, since is not None and now - since > limit)
    return out


_cache: dict[str, tuple[float, list[str]]] = {}  # database URL -> (when, messages)


def banner_messages(db: Session) -> list[str]:
    """The banner's lines; cached a few seconds per web process and database (every page
    asks)."""
    key = get_settings().database_url
    when, messages = _cache.get(key, (0.0, []))
    if time.monotonic() - when >= CACHE_SECONDS:
        messages = [MESSAGES[k] for k, s in statuses(db).items() if s.stale]
        _cache[key] = (time.monotonic(), messages)
    return messages
