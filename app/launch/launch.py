"""Store a run and queue it: the one path shared by every entrance (the form, the JSON API and
the CLI, sweeps, smoke tests, a dry run's "Launch"), behind the one pre-launch check
(``app.launch.gate``). It commits, resolves hosts and talks to the broker: call it from a worker
thread, never on the event loop."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from app.dryruns import service as dry_runs
from app.dryruns.models import DryRun
from app.launch import gate, launcher
from app.launch.answers import Answers
from app.runs import lifecycle, service
from app.runs.models import Run
from grpodeck.contract.spec import RunSpec

log = logging.getLogger(__name__)


def launch(db: Session, spec: RunSpec, *, created_by: int | None = None,
           parent_id: int | None = None, smoke_full_steps: int | None = None,
           sweep_id: str | None = None, answers: Answers | None = None) -> Run:
    """Commit the run first, then queue it; a broker failure fails the run visibly, never
    loses it. ``parent_id``: the run it was cloned from; ``smoke_full_steps``: set on a smoke
    test, the max_steps of the full run it offers to launch; ``sweep_id``: the sweep it
    belongs to; ``answers``: the finding a "Try this fix" run answers. Raises
    ``gate.LaunchRefused`` (nothing stored) when the deployment cannot run the spec: every
    entrance answers it as its own field errors."""
    gate.check(spec)
    return _store_and_queue(db, spec, created_by=created_by, parent_id=parent_id,
                            smoke_full_steps=smoke_full_steps, sweep_id=sweep_id,
                            answers=answers)


def launch_sweep(db: Session, specs: list[RunSpec], *, created_by: int | None,
                 sweep_id: str) -> list[Run]:
    """Every spec passes the gate before any is stored (a sweep is all or nothing), then each
    is stored and queued: the gate's look-ups run once per spec, not twice."""
    for spec in specs:
        gate.check(spec)
    return [_store_and_queue(db, spec, created_by=created_by, sweep_id=sweep_id)
            for spec in specs]


def _store_and_queue(db: Session, spec: RunSpec, *, created_by: int | None,
                     parent_id: int | None = None, smoke_full_steps: int | None = None,
                     sweep_id: str | None = None, answers: Answers | None = None) -> Run:
    """The launch itself, once the spec passed the gate."""
    run, ticket = service.create_run(db, spec=spec, created_by=created_by, parent_id=parent_id)
    run.smoke_full_steps = smoke_full_steps
    run.sweep_id = sweep_id
    if answers is not None:
        run.answers_finding_id, run.answers_category = answers.finding_id, answers.category
    db.commit()
    try:
        run.task_id = launcher.enqueue(run, ticket)
    except Exception as exc:
        log.exception("could not queue run %s", run.id)
        lifecycle.fail(run, f"could not queue the run: {exc}")
    db.commit()
    return run


def start_dry_run(db: Session, spec: RunSpec, prompts: int, created_by: int | None) -> DryRun:
    """A dry run behind the same gate as a launch (``gate.LaunchRefused``, nothing stored):
    "Launch" on its page would launch the spec as it is."""
    gate.check(spec)
    return dry_runs.start(db, spec, prompts, created_by)
