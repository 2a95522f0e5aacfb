"""The outbox: delivery jobs written in the ingest transaction, claimed atomically by senders.

Claiming is one conditional UPDATE (``WHERE status = 'pending'`` or an expired lease) that
stamps a fresh claim token; on PostgreSQL the candidate rows are first locked with
``FOR UPDATE SKIP LOCKED`` so concurrent senders pick different rows instead of waiting. Two
senders running by mistake therefore never send the same job twice. A sender that dies while
sending leaves a lease that expires, and the job is picked up again (at-least-once only in that
crash window).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from app.alerts.models import (
    DEAD,
    PENDING,
    SENDING,
    SENT,
    Alert,
    AlertConfig,
    Delivery,
    DeliveryAttempt,
)
from app.alerts.rules import destination_key, rules_of, split_urls
from app.core.config import get_settings
from app.runs.models import Run

MAX_BACKOFF_S = 3600.0
LEASE_S = 300.0  # longer than any send (per-destination timeouts are seconds)


def deployment_urls(db: Session) -> list[str]:
    """``GRPODECK_ALERT_URLS`` plus the ones saved on /settings/alerts, without repeats."""
    saved = db.get(AlertConfig, 1)
    urls = split_urls(get_settings().alert_urls) + list(saved.urls if saved else [])
    return list(dict.fromkeys(urls))


def destinations(db: Session, run: Run | None) -> list[str]:
    extra = rules_of(run.spec).urls if run is not None else []
    return list(dict.fromkeys(deployment_urls(db) + extra))


def enqueue(db: Session, run: Run | None, event: str, alert_ids: Sequence[int],
            payload: dict[str, Any], urls: Iterable[str] | None = None
            ) -> list[Delivery]:
    """One job per destination; the caller's transaction commits them with the alert change.

    Due at once by the real clock (the alert change may carry an evaluation time)."""
    due = datetime.now(UTC)
    jobs = []
    for url in (destinations(db, run) if urls is None else urls):
        job = Delivery(run_id=run.id if run else None, destination=url,
                       destination_key=destination_key(url), event=event,
                       alert_ids=list(alert_ids), payload=payload, status=PENDING, attempts=0,
                       next_attempt_at=due, created_at=due)
        db.add(job)
        jobs.append(job)
    return jobs


def _claimable(now: datetime):  # type: ignore[no-untyped-def]
    return or_(and_(Delivery.status == PENDING, Delivery.next_attempt_at <= now),
               and_(Delivery.status == SENDING, Delivery.lease_until < now))


def claim(db: Session, owner: str, now: datetime | None = None, *, limit: int = 100,
          skip_keys: Iterable[str] = ()) -> list[Delivery]:
    """Atomically take due jobs for ``owner``; returns only rows this call won. Commits."""
    now = now or datetime.now(UTC)
    stmt = select(Delivery.id).where(_claimable(now))
    skip = list(skip_keys)
    if skip:
        stmt = stmt.where(Delivery.destination_key.not_in(skip))
    ids = db.scalars(stmt.order_by(Delivery.id).limit(limit)
                     .with_for_update(skip_locked=True)).all()
    if not ids:
        db.rollback()
        return []
    token = uuid.uuid4().hex
    db.execute(update(Delivery).where(Delivery.id.in_(ids), _claimable(now))
               .values(status=SENDING, claim_token=token, claimed_by=owner[:120],
                       lease_until=now + timedelta(seconds=LEASE_S))
               .execution_options(synchronize_session=False))
    db.commit()
    return list(db.scalars(select(Delivery).where(Delivery.claim_token == token)
                           .order_by(Delivery.id)).all())


def renew(db: Session, jobs: Sequence[Delivery], timeout: float) -> None:
    """Extend the lease before an attempt, so a long queue of sends to one slow destination
    never lets another sender take over a job that is about to be sent. Commits."""
    until = datetime.now(UTC) + timedelta(seconds=LEASE_S + timeout)
    for job in jobs:
        db.execute(update(Delivery).where(Delivery.id == job.id,
                                          Delivery.claim_token == job.claim_token)
                   .values(lease_until=until).execution_options(synchronize_session=False))
    db.commit()


def backoff(attempts: int) -> float:
    """Seconds before retry number ``attempts`` (1, 2, ...): base, 3x base, 9x base, ..."""
    base = get_settings().alert_retry_seconds
    return min(MAX_BACKOFF_S, base * 3 ** max(0, attempts - 1))


def record(db: Session, job: Delivery, *, ok: bool, error: str | None, seconds: float,
           owner: str, now: datetime | None = None, digest_id: str | None = None) -> bool:
    """Store one attempt's outcome, if this sender still owns the job; returns whether it did.

    A failure is retried with backoff until ``alert_max_attempts``, then marked dead: it stays
    visible, with the reason, on /alerts."""
    now = now or datetime.now(UTC)
    attempts = job.attempts + 1
    if ok:
        values: dict[str, Any] = {"status": SENT, "sent_at": now, "last_error": None}
    elif attempts >= get_settings().alert_max_attempts:
        values = {"status": DEAD, "last_error": error}
    else:
        values = {"status": PENDING, "last_error": error,
                  "next_attempt_at": now + timedelta(seconds=backoff(attempts))}
    values.update(attempts=attempts, lease_until=None, digest_id=digest_id)
    done = db.execute(update(Delivery).where(Delivery.id == job.id,
                                             Delivery.claim_token == job.claim_token)
                      .values(**values).execution_options(synchronize_session=False))
    if done.rowcount:  # type: ignore[attr-defined]
        db.add(DeliveryAttempt(delivery_id=job.id, number=attempts, at=now, ok=ok,
                               error=error, seconds=round(seconds, 3), sender=owner[:120]))
    db.commit()
    return bool(done.rowcount)  # type: ignore[attr-defined]


def deliveries_for(db: Session, alerts: Sequence[Alert]) -> dict[int, list[Delivery]]:
    """Jobs per alert id (a job may carry several alerts of one run)."""
    found: dict[int, list[Delivery]] = {a.id: [] for a in alerts}
    run_ids = {a.run_id for a in alerts}
    if not run_ids:
        return found
    for job in db.scalars(select(Delivery).where(Delivery.run_id.in_(run_ids))
                          .order_by(Delivery.id)):
        for i in job.alert_ids or []:
            if i in found:
                found[i].append(job)
    return found


def attempts_for(db: Session, job_ids: Sequence[int]) -> dict[int, list[DeliveryAttempt]]:
    found: dict[int, list[DeliveryAttempt]] = {i: [] for i in job_ids}
    if job_ids:
        for a in db.scalars(select(DeliveryAttempt).where(
                DeliveryAttempt.delivery_id.in_(list(job_ids))).order_by(DeliveryAttempt.id)):
            found[a.delivery_id].append(a)
    return found
