"""Runs the pure diagnostics as metrics arrive, stores findings, and applies the guard rail.

The diagnostics state (bounded in size) lives in its own table and, between batches, decoded in
``state_cache``, so each ingest batch costs work proportional to the batch, never a re-scan of
the run's history nor a rewrite of the whole state; the detectors and the findings upsert run at
a bounded rate per live run.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.diagnostics import Diagnosis, RunContext
from app.diagnostics.coverage import reward_read
from app.diagnostics.model import Finding
from app.health import stability, state_cache
from app.health.models import FindingChange, FindingRecord, Stored
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
        seconds_per_step=run.seconds_per_step, run_id=run.id,
        reward_weights=_reward_weights(spec))


def _reward_weights(spec: dict) -> dict[str, float] | None:
    """Component name -> weight from a launched run's spec (weight 0 = monitor-only, the
    objective the hacking check compares against); None for imported runs."""
    rewards = spec.get("rewards")
    if not isinstance(rewards, list):
        return None
    weights = {r["name"]: float(r.get("weight", 1.0)) for r in rewards
               if isinstance(r, dict) and isinstance(r.get("name"), str)
               and isinstance(r.get("weight", 1.0), int | float)}
    return weights or None


def observe(db: Session, run: Run, rows: list[tuple[int, dict[str, float]]],
            now: datetime) -> tuple[Diagnosis, Stored | None]:
    """Feed new rows (or none, to re-check time-based findings) and store the result.

    Returns the raw diagnosis and what was stored; what the page shows (and the guard rail acts
    on) is its stabilised form, stored by ``store``, whose transitions the caller turns into
    alerts (``app.ingest.pipeline.observe``). When the detectors' rate bound skipped this batch
    (``state_cache``), findings stay as stored: the last diagnosis, and nothing stored."""
    diagnosis = state_cache.update(db, run, rows, context_for(run, now))
    if diagnosis is None:
        return state_cache.last_diagnosis(run.id), None
    latest = max((step for step, _ in rows), default=0)
    stored = store(db, run, diagnosis, now, new_steps=bool(rows),
                   step=max(run.current_step or 0, latest))
    _guard_rail(run, stored.active)
    return diagnosis, stored


def store(db: Session, run: Run, diagnosis: Diagnosis, now: datetime, *, new_steps: bool = True,
          step: int | None = None) -> Stored:
    """Upsert findings as ``stability`` lets them show; ones no longer shown stay, resolved.

    Returns the active records and the transitions of what is shown (opened, changed severity,
    resolved), from which alerts are derived. The run's verdict is set from what is shown, not
    from the raw diagnosis, so a one-batch blip never changes it."""
    live = lifecycle.is_live(run)
    step = (run.current_step or 0) if step is None else step
    existing = {(f.category, f.metric_key): f for f in findings_for(db, run.id)}
    changes: list[FindingChange] = []
    raw = {(f.category, f.metric or ""): f for f in diagnosis.findings}
    for key in raw.keys() | {k for k, r in existing.items() if r.active or r.stability}:
        record, finding = existing.get(key), raw.get(key)
        before = stability.Memory.from_dict(record.stability) if record and record.active \
            else stability.Memory()
        if record is not None and record.active and before.shown is None:
            before = stability.Memory(shown=record.severity)  # stored before stabilisation
        after = stability.advance(before, finding.severity if finding else None, step=step,
                                  live=live, new_steps=new_steps, category=key[0],
                                  exact=bool(finding and finding.evidence.get("exact_signal")))
        if record is None and after.shown is None:
            continue
        if record is None:
            record = FindingRecord(run_id=run.id, category=key[0], metric_key=key[1],
                                   opened_at=now)
            db.add(record)
            existing[key] = record
        shown_before = record.severity if record.active and record.id is not None else None
        _apply(record, finding, after, now)
        shown_after = record.severity if record.active else None
        if shown_before != shown_after:
            changes.append(FindingChange(record, shown_before, shown_after))
    active = [r for r in existing.values() if r.active]
    run.verdict = stability.verdict((r.severity for r in active), steps=step, live=live,
                                    reward_read=reward_read(diagnosis))
    if changes:
        db.flush()  # ids for new records: alerts link to them
    return Stored(active, changes)


def _apply(record: FindingRecord, finding: Finding | None, memory: stability.Memory,
           now: datetime) -> None:
    """Write what is shown: the latest evidence when the detectors still report the finding,
    the last known evidence while it waits to resolve."""
    if finding is not None:
        data = finding.to_dict()
        record.summary, record.evidence, record.actions = finding.summary, data["evidence"], \
            data["actions"]
        record.first_step, record.last_step = finding.first_step, finding.last_step
    record.stability = memory.to_dict() if memory.pending else None
    if memory.shown is None:
        if record.active:
            record.active, record.resolved_at = False, now
        return
    if not record.active:
        record.opened_at = now  # a new episode of the same finding
    record.severity, record.active, record.resolved_at, record.updated_at = \
        memory.shown, True, None, now


def _guard_rail(run: Run, shown: Sequence[FindingRecord]) -> None:
    """A run launched with stop_on_critical is asked to stop at its first *confirmed* critical
    finding (see ``stability``): a one-batch blip never kills a run."""
    if not (run.spec or {}).get("stop_on_critical") or run.status != lifecycle.Status.RUNNING:
        return
    critical = [f for f in shown if f.severity == "critical" and f.category != "lost"]
    if critical and run.cancel_requested_at is None:
        lifecycle.request_cancel(run, reason=f"stopped by diagnostics: {critical[0].summary}")


def findings_for(db: Session, run_id: int, *, active_only: bool = False
                 ) -> Sequence[FindingRecord]:
    stmt = select(FindingRecord).where(FindingRecord.run_id == run_id)
    if active_only:
        stmt = stmt.where(FindingRecord.active.is_(True))
    return db.scalars(stmt.order_by(FindingRecord.id)).all()
