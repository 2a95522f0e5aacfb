"""Progress figures for a run: elapsed time and ETA from the smoothed step time, with the
evaluations still ahead counted in (issue 34: a 6.5-minute evaluation froze the ETA)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.runs.models import Run
from grpodeck.contract.spec import eval_every

EVALUATING = "evaluating"


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Progress:
    step: int
    max_steps: int
    percent: float
    elapsed_s: float | None
    eta_s: float | None


def record_stage(run: Run, stage: str, done: int | None, total: int | None,
                 now: datetime) -> None:
    """Keep what the child said it is doing; an evaluation keeps {done, total, since} while it
    runs and leaves {last_s, ended}, its length and end, when the child moves on (training
    resumed then: the stage timer counts from it, and the pace leaves the evaluation out)."""
    ev: dict[str, Any] = dict(run.eval_progress or {})
    if stage == EVALUATING and total:
        since = ev.get("since") or now.isoformat()
        ev = {"done": done or 0, "total": total, "since": since, "last_s": ev.get("last_s")}
    elif ev.get("since"):
        ev = {"last_s": max(0.0, (now - _aware(datetime.fromisoformat(ev["since"])))
                            .total_seconds()), "ended": now.isoformat()}
    run.stage = stage
    run.eval_progress = ev or None


def training_resumed(run: Run) -> datetime | None:
    """When the last evaluation ended and training resumed; None before any evaluation."""
    ended = (run.eval_progress or {}).get("ended")
    return None if ended is None else _aware(datetime.fromisoformat(ended))


def evaluating_within(run: Run, start: datetime, end: datetime) -> float:
    """Seconds of ``start``..``end`` the run spent evaluating: the evaluation under way (up to
    ``end``) or the last one. Why: a step's time is measured between two reports, and the
    step after an evaluation waited for all of it (a 2 s pace read 20 s after a minute's
    evaluation)."""
    ev = run.eval_progress or {}
    if ev.get("since"):
        lo, hi = _aware(datetime.fromisoformat(ev["since"])), end
    elif (ended := training_resumed(run)) is not None and ev.get("last_s") is not None:
        lo, hi = ended - timedelta(seconds=float(ev["last_s"])), ended
    else:
        return 0.0
    return max(0.0, (min(end, hi) - max(start, lo)).total_seconds())


def evaluation_now(run: Run) -> tuple[int, int, datetime] | None:
    """(batches done, of how many, since when) while the run evaluates; None otherwise."""
    ev = run.eval_progress or {}
    if run.stage != EVALUATING or not ev.get("since") or not ev.get("total"):
        return None
    return int(ev.get("done") or 0), int(ev["total"]), _aware(datetime.fromisoformat(ev["since"]))


def _eval_eta(run: Run, now: datetime) -> float:
    """Seconds of evaluation still ahead: the rest of the current one (at its own pace so far)
    and one more per ``eval_steps`` boundary left before max_steps, each as long as the last."""
    current = evaluation_now(run)
    per_eval = (run.eval_progress or {}).get("last_s")
    left = 0.0
    if current is not None:
        done, total, since = current
        spent = max(0.0, (now - since).total_seconds())
        if done:
            per_eval = per_eval or spent * total / done
            left = spent * (total - done) / done
        elif per_eval:
            left = max(0.0, per_eval - spent)
    spec = run.spec or {}
    every = eval_every(spec.get("eval_split"), spec.get("eval_steps"), run.max_steps)
    if per_eval and every and run.max_steps:
        left += (run.max_steps // every - run.current_step // every) * per_eval
    return left


def progress(run: Run, now: datetime | None = None) -> Progress:
    now = now or datetime.now(UTC)
    elapsed = None
    if run.started_at is not None:
        end = _aware(run.finished_at) if run.finished_at else now
        elapsed = (end - _aware(run.started_at)).total_seconds()
    eta = None
    if run.status == "running" and run.seconds_per_step:
        eta = max(0, run.max_steps - run.current_step) * run.seconds_per_step \
            + _eval_eta(run, now)
    percent = 100.0 * min(run.current_step, run.max_steps) / max(1, run.max_steps)
    return Progress(run.current_step, run.max_steps, percent, elapsed, eta)
