"""What the JSON API returns about runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from app.runs.models import Run
from grpodeck.contract.alerts import masked_spec


class RunOut(BaseModel):
    id: int
    name: str
    source: str
    status: str
    step: int
    max_steps: int
    spec: dict[str, Any]
    error: str | None
    traceback_tail: str | None
    stop_reason: str | None
    cancel_requested: bool
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    seconds_per_step: float | None

    @classmethod
    def of(cls, run: Run) -> RunOut:
        return cls(id=run.id, name=run.name, source=run.source, status=run.status,
                   step=run.current_step, max_steps=run.max_steps, spec=masked_spec(run.spec),
                   error=run.error, traceback_tail=run.traceback_tail,
                   stop_reason=run.stop_reason,
                   cancel_requested=run.cancel_requested_at is not None,
                   created_at=run.created_at, started_at=run.started_at,
                   finished_at=run.finished_at, seconds_per_step=run.seconds_per_step)


class LaunchedOut(BaseModel):
    id: int
    status: str
    url: str
