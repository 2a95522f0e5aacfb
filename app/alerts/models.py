"""Alert records, mutes, the delivery outbox and every delivery attempt."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base

OPEN, RESOLVED = "open", "resolved"
PENDING, SENDING, SENT, DEAD = "pending", "sending", "sent", "dead"


class Alert(Base):
    """One alert per condition (run, category; the metric is evidence, issue 23): later
    batches update it, a return soon after it resolved reopens it (``alert_reopen_seconds``)."""

    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    finding_id: Mapped[int | None] = mapped_column(
        ForeignKey("findings.id", ondelete="SET NULL"))
    category: Mapped[str] = mapped_column(String(40))
    metric_key: Mapped[str] = mapped_column(String(200), default="")
    severity: Mapped[str] = mapped_column(String(10))
    # [{"severity": ..., "at": iso time, "step": n, "event": opened|escalated|eased|...}]
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    state: Mapped[str] = mapped_column(String(10), index=True, default=OPEN)
    first_step: Mapped[int] = mapped_column(Integer, default=0)
    last_step: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[str] = mapped_column(Text, default="")
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    action: Mapped[str | None] = mapped_column(Text)
    opened_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    resolved_reason: Mapped[str | None] = mapped_column(Text)
    acknowledged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # who acknowledged: a user name once accounts exist (auth branch), else None
    acknowledged_by: Mapped[str | None] = mapped_column(String(200))

    @property
    def metric(self) -> str | None:
        return self.metric_key or None


class AlertMute(Base):
    """A muted run (category "") or one category on a run: alerts are still recorded and
    shown, but nobody is messaged."""

    __tablename__ = "alert_mutes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    category: Mapped[str] = mapped_column(String(40), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    created_by: Mapped[str | None] = mapped_column(String(200))


class Delivery(Base):
    """An outbox job: one message (for one or more alerts of one run) to one destination.

    Written in the transaction that changed the alerts; a sender process claims it with a
    conditional update (``claim_token``), so two senders never deliver it twice."""

    __tablename__ = "alert_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"),
                                               index=True)
    destination: Mapped[str] = mapped_column(Text)
    destination_key: Mapped[str] = mapped_column(String(64), index=True)
    event: Mapped[str] = mapped_column(String(16))  # opened | escalated | reopened | resolved | test
    alert_ids: Mapped[list[int]] = mapped_column(JSON, default=list)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(10), default=PENDING, index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True),
                                                      server_default=func.now())
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    claim_token: Mapped[str | None] = mapped_column(String(64), index=True)
    claimed_by: Mapped[str | None] = mapped_column(String(120))
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    digest_id: Mapped[str | None] = mapped_column(String(64))  # sent inside a digest message


class DeliveryAttempt(Base):
    __tablename__ = "alert_delivery_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        ForeignKey("alert_deliveries.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ok: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text)
    seconds: Mapped[float] = mapped_column()
    sender: Mapped[str | None] = mapped_column(String(120))


class AlertConfig(Base):
    """Deployment-wide destinations edited on /settings/alerts (in addition to
    ``GRPODECK_ALERT_URLS``). One row, id 1."""

    __tablename__ = "alert_config"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    urls: Mapped[list[str]] = mapped_column(JSON, default=list)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
