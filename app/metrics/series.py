"""Read stored metrics back as per-name series, downsampled for charts.

Charts of a 100k-step run must not ship 100k points per trace to the browser: MinMaxLTTB
(tsdownsample) keeps the shape, spikes included, with a bounded number of points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session
from tsdownsample import MinMaxLTTBDownsampler

from app.metrics.models import MetricPoint


@dataclass
class Series:
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, list[float | int | str | None]]:
        """NaN/inf become strings: JSON has no such numbers, but a person must see them."""
        return {"steps": list(self.steps),
                "values": [v if math.isfinite(v) else repr(v) for v in self.values]}


def _value(point_value: float | None, raw: str | None) -> float:
    if point_value is not None:
        return point_value
    return float(raw) if raw else math.nan


def load_series(db: Session, run_id: int, names: list[str] | None = None) -> dict[str, Series]:
    stmt = select(MetricPoint.name, MetricPoint.step, MetricPoint.value, MetricPoint.raw).where(
        MetricPoint.run_id == run_id)
    if names:
        stmt = stmt.where(MetricPoint.name.in_(names))
    out: dict[str, Series] = {}
    for name, step, value, raw in db.execute(stmt.order_by(MetricPoint.name, MetricPoint.step)):
        series = out.setdefault(name, Series())
        series.steps.append(step)
        series.values.append(_value(value, raw))
    return out


def downsample(series: Series, max_points: int) -> Series:
    """Keep at most ``max_points`` (first, last and extremes included); NaNs are kept as-is."""
    n = len(series.steps)
    if n <= max_points or max_points < 3:
        return series
    steps = np.asarray(series.steps, dtype=np.int64)
    values = np.asarray(series.values, dtype=np.float64)
    finite = np.isfinite(values)
    keep = MinMaxLTTBDownsampler().downsample(steps[finite], values[finite], n_out=max_points)
    index = np.union1d(np.flatnonzero(finite)[keep], np.flatnonzero(~finite))
    return Series(steps=steps[index].tolist(), values=values[index].tolist())
