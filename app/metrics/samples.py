"""The client's system samples, each kept at its own time (``system_samples``).

Why: the sampler (``grpodeck.client.system``) stamps every sample with ``system/time`` but
reports it at the latest step the trainer logged, and a step keeps one value per metric. While
a run evaluates (or saves a checkpoint) the step stands still, so the minutes of samples taken
then were stored as one point, the last (issue 56): the system charts, drawn against the clock
for exactly that case, showed nothing of it. Every received row that carries a plausible
``system/time`` is therefore also stored here, keyed by that time; the system charts draw
these, and the metric store keeps each step's last sample for everything else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.metrics.models import SystemSample
from app.metrics.names import Row

TIME = "system/time"  # Unix seconds of the sample (grpodeck.client.system)
PREFIX = "system/"
# A stamp outside 2000-2100 is no clock reading (a unit mix-up, a hostile client): not a sample.
PLAUSIBLE = (946_684_800.0, 4_102_444_800.0)

# A sample re-sent (a retried batch, a replayed spool) has the same time: kept once.
_WRITE = text("INSERT INTO system_samples (run_id, at_ms, step, metrics) "
              "VALUES (:run, :at, :step, :metrics) ON CONFLICT DO NOTHING")


@dataclass
class Samples:
    """A run's samples in time order: ``times`` in ms since the epoch, the step each carried,
    and per metric name its (time, value) points (a sample without that metric has none)."""

    times: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    points: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)

    def step_at(self) -> dict[int, int]:
        """Each sample's step by its time."""
        return dict(zip(self.times, self.steps, strict=True))

    def add(self, at_ms: int, step: int, metrics: dict[str, float]) -> None:
        self.times.append(at_ms)
        self.steps.append(step)
        for name, value in metrics.items():
            xs, ys = self.points.setdefault(name, ([], []))
            xs.append(at_ms)
            ys.append(value)


def sample_of(step: int, metrics: dict[str, float]) -> dict[str, int | str] | None:
    """The row to store for one received row, or None when it is no sample (no plausible
    ``system/time``, or nothing finite besides it)."""
    stamp = metrics.get(TIME)
    if stamp is None or not PLAUSIBLE[0] <= stamp <= PLAUSIBLE[1]:
        return None
    values = {k: v for k, v in metrics.items()
              if k.startswith(PREFIX) and k != TIME and math.isfinite(v)}
    if not values:
        return None
    return {"at": round(stamp * 1000), "step": step, "metrics": orjson.dumps(values).decode()}


def store(db: Session, run_id: int, rows: Sequence[Row]) -> int:
    """Store the samples among ``rows`` (as received, before rows of one step are merged);
    returns how many rows were samples. The caller holds the run's write lock and commits."""
    found = [s for step, metrics in rows if (s := sample_of(step, metrics)) is not None]
    if found:
        db.execute(_WRITE, [{"run": run_id, **s} for s in found])
    return len(found)


def load(db: Session, run_id: int, after_ms: int | None = None) -> Samples:
    """The run's samples (those after ``after_ms`` only: what a live chart appends)."""
    stmt = (select(SystemSample.at_ms, SystemSample.step, SystemSample.metrics)
            .where(SystemSample.run_id == run_id).order_by(SystemSample.at_ms))
    if after_ms is not None:
        stmt = stmt.where(SystemSample.at_ms > after_ms)
    out = Samples()
    for at_ms, step, metrics in db.execute(stmt):
        out.add(int(at_ms), int(step), orjson.loads(metrics))
    return out
