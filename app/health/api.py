"""GET /api/runs/{id}/findings: the run's verdict and findings as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter
from sqlalchemy.orm import Session

from app.core.db import SessionDep
from app.diagnostics.coverage import not_applicable
from app.health import stability, state_cache
from app.health.models import FindingRecord
from app.health.service import findings_for
from app.metrics.reading import Reading
from app.runs import lifecycle
from app.runs.lookup import run_or_404
from app.runs.models import Run

router = APIRouter(prefix="/api/runs", tags=["findings"])


@router.get("/{run_id}/findings")
def findings(run_id: int, db: SessionDep, include_resolved: bool = False) -> dict[str, Any]:
    """Active findings, worst first; `include_resolved` adds ones that no longer hold.

    Coverage: `metrics` are the canonical names the checks read, `unchecked` maps each check
    that did not run to the metric it needs, `not_applicable` those of them the run's settings
    rule out to why (no eval split, beta 0, no GPU), `reason` says why the verdict is unknown;
    `read_as` maps each key the run sent under another name to the name it was read as
    (`vocabulary`: the trainer whose names were recognised, null for TRL's own)."""
    run = run_or_404(db, run_id)
    records = findings_for(db, run_id, active_only=not include_resolved)
    verdict, words = stability.label(run.verdict, live=lifecycle.is_live(run))
    return {"run_id": run.id, "verdict": verdict, "verdict_text": words,
            "findings": [r.to_dict() for r in sort_findings(records)], **coverage(db, run)}


def coverage(db: Session, run: Run) -> dict[str, Any]:
    """{metrics, unchecked, not_applicable, reason} of the run's latest diagnosis (empty before
    any data), and how its keys were read: ``vocabulary`` and ``read_as`` (key sent ->
    canonical name read)."""
    reading = Reading.from_json(run.metric_reading)
    read = {"vocabulary": reading.vocabulary, "read_as": dict(sorted(reading.renames.items()))}
    diagnosis = state_cache.current_diagnosis(db, run)
    if diagnosis is None:
        return {"metrics": [], "unchecked": {}, "not_applicable": {}, "reason": None, **read}
    return {"metrics": diagnosis.metrics, "unchecked": diagnosis.unchecked,
            "not_applicable": not_applicable(diagnosis.unchecked, run.spec or {},
                                             run.metric_names or []),
            "reason": diagnosis.reason, **read}


def sort_findings(records: Sequence[FindingRecord]) -> list[FindingRecord]:
    """Active before resolved, then critical, warning, info, then by first step."""
    order = {"critical": 0, "warning": 1, "info": 2}
    return sorted(records, key=lambda r: (not r.active, order.get(r.severity, 3), r.first_step))


def group_by_category(records: Sequence[FindingRecord]) -> list[list[FindingRecord]]:
    """One entry per category, its most pressing record first: an active critical on one
    metric and a resolved warning on another are one problem, not a contradiction."""
    groups: dict[str, list[FindingRecord]] = {}
    for record in sort_findings(records):
        groups.setdefault(record.category, []).append(record)
    return list(groups.values())
