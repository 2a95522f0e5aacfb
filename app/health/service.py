"""Runs the pure diagnostics as metrics arrive, stores findings, and applies the guard rail.

The diagnostics state (bounded in size) lives on the run row and, between batches, decoded in
``state_cache``, so each ingest batch costs work proportional to the batch, never a re-scan of
the run's history nor a rewrite of the whole state.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.diagnostics import Diagnosis, RunContext
from app.health import state_cache
from app.health.models import FindingRecord
from app.runs import lifecycle
from app.runs.models import Run


def _epoch(value: datetime | None) -> float | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def context_for(run: Run, now: datetime | None = None) -> RunContext:
    spec = run.spec or {}
    return RunContext(
        max_completion_length=spec.get("max_completion_length"), beta=spec.get("beta"),
        num_generations=spec.get("num_generations"), is_live=lifecycle.is_live(run),
        now=_epoch(now or datetime.now(UTC)), last_report_at=_epoch(run.last_report_at),
        seconds_per_step=run.seconds_per_step)


def observe(db: Session, run: Run, rows: list[tuple[int, dict[str, float]]],
            now: datetime | None = None) -> Diagnosis:
    """Feed new rows (or none, to re-check time-based findings) and store the result."""
    diagnosis = state_cache.update(db, run, rows, context_for(run, now))
    store(db, run, diagnosis, now or datetime.now(UTC))
    _guard_rail(run, diagnosis)
    return diagnosis


def store(db: Session, run: Run, diagnosis: Diagnosis, now: datetime) -> None:
    """Upsert current findings; ones no longer reported stay, marked resolved."""
    existing = {(f.category, f.metric_key): f for f in findings_for(db, run.id)}
    current = set()
    for finding in diagnosis.findings:
        key = (finding.category, finding.metric or "")
        current.add(key)
        data = finding.to_dict()
        record = existing.get(key)
        if record is None:
            record = FindingRecord(run_id=run.id, category=finding.category, metric_key=key[1],
                                   opened_at=now)
            db.add(record)
        record.severity, record.summary = finding.severity, finding.summary
        record.first_step, record.last_step = finding.first_step, finding.last_step
        record.evidence, record.actions = data["evidence"], data["actions"]
        record.active, record.resolved_at, record.updated_at = True, None, now
    for key, record in existing.items():
        if key not in current and record.active:
            record.active, record.resolved_at = False, now
    run.verdict = diagnosis.verdict


def _guard_rail(run: Run, diagnosis: Diagnosis) -> None:
    """A run launched with stop_on_critical is asked to stop at its first critical finding."""
    if not (run.spec or {}).get("stop_on_critical") or run.status != lifecycle.Status.RUNNING:
        return
    critical = [f for f in diagnosis.findings if f.severity == "critical" and f.category != "lost"]
    if critical and run.cancel_requested_at is None:
        lifecycle.request_cancel(run, reason=f"stopped by diagnostics: {critical[0].summary}")


def findings_for(db: Session, run_id: int, *, active_only: bool = False
                 ) -> Sequence[FindingRecord]:
    stmt = select(FindingRecord).where(FindingRecord.run_id == run_id)
    if active_only:
        stmt = stmt.where(FindingRecord.active.is_(True))
    return db.scalars(stmt.order_by(FindingRecord.id)).all()
