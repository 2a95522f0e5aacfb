"""Where a run stands before and while it trains, in the words the run page shows.

Why: "0 / 80" for a minute after launch says nothing; a person waiting wants to know whether
the run is still in the queue (and behind how many), loading its model, waiting for its first
step, training, evaluating (n of m batches) or saving. The child reports its stage through
the worker (``runs.stage``);
the queue position and "training" are read from the runs themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.runs.lifecycle import Status
from app.runs.models import Run
from app.runs.progress import evaluation_now, training_resumed

STAGES = (("queued", "queued"), ("loading_model", "loading model"),
          ("first_step", "first step"), ("training", "training"), ("evaluating", "evaluating"),
          ("saving", "saving"))


@dataclass(frozen=True)
class StageView:
    key: str
    words: str  # "queued: 2 runs ahead", "loading model", ...
    order: tuple[tuple[str, str], ...] = STAGES
    since: datetime | None = None  # when this stage began, where it is known (an evaluation)
    for_s: float | None = None  # and how long ago that was


def queue_position(db: Session, run: Run) -> int:
    """How many queued runs were launched before this one (workers take them oldest first)."""
    return db.scalar(select(func.count()).select_from(Run).where(
        Run.status == Status.QUEUED, Run.id < run.id, Run.source == "launched")) or 0


def stage_of(db: Session, run: Run) -> StageView | None:
    """The stage of a queued or running launched run; None once it ended (or for a run an
    outside script reports: it has no queue and no child to ask)."""
    if run.source != "launched":
        return None
    if run.status == Status.QUEUED:
        ahead = queue_position(db, run)
        words = "next in line" if ahead == 0 else f"{ahead} run{'s' if ahead != 1 else ''} ahead"
        return StageView("queued", f"queued: {words}")
    if run.status != Status.RUNNING:
        return None
    if run.stage == "saving":
        return StageView("saving", "saving")
    if (evaluation := evaluation_now(run)) is not None:
        done, total, since = evaluation
        return StageView("evaluating", f"evaluating ({done} of {total} batches)", since=since,
                         for_s=max(0.0, (datetime.now(UTC) - since).total_seconds()))
    if run.current_step > 0:  # since the last evaluation ended, else since the run started
        resumed = training_resumed(run)
        return StageView("training", "training", since=resumed, for_s=None if resumed is None
                         else max(0.0, (datetime.now(UTC) - resumed).total_seconds()))
    if run.stage == "first_step":
        return StageView("first_step", "model loaded, waiting for the first step")
    return StageView("loading_model", "loading model and data")
