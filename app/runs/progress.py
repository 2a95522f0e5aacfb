"""Progress figures for a run: elapsed time and ETA from the smoothed step time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from app.runs.models import Run


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Progress:
    step: int
    max_steps: int
    percent: float
    elapsed_s: float | None
    eta_s: float | None


def progress(run: Run, now: datetime | None = None) -> Progress:
    now = now or datetime.now(UTC)
    elapsed = None
    if run.started_at is not None:
        end = _aware(run.finished_at) if run.finished_at else now
        elapsed = (end - _aware(run.started_at)).total_seconds()
    eta = None
    if run.status == "running" and run.seconds_per_step:
        eta = max(0, run.max_steps - run.current_step) * run.seconds_per_step
    percent = 100.0 * min(run.current_step, run.max_steps) / max(1, run.max_steps)
    return Progress(run.current_step, run.max_steps, percent, elapsed, eta)
