"""Read stored metrics back as per-name series, downsampled for charts.

Charts of a 100k-step run must not ship 100k points per trace to the browser: MinMaxLTTB
(tsdownsample) keeps the shape, spikes included, with a bounded number of points.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy.orm import Session
from tsdownsample import MinMaxLTTBDownsampler

from app.metrics import store


@dataclass
class Series:
    """A metric's points in step order. A summary (a rollup level above 0) also carries, per
    point, the min, max and count of the bucket whose mean ``values`` holds: a chart draws it as
    a band around a mean line, never as a line through the extremes."""

    steps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    lows: list[float] | None = None
    highs: list[float] | None = None
    counts: list[int] | None = None

    @property
    def summarised(self) -> bool:
        return self.lows is not None

    def to_json(self) -> dict[str, list[float | int | str | None]]:
        """NaN/inf become strings: JSON has no such numbers, but a person must see them."""
        out: dict[str, list[float | int | str | None]] = {
            "steps": list(self.steps), "values": _texts(self.values)}
        if self.lows is not None and self.highs is not None and self.counts is not None:
            out.update(min=_texts(self.lows), max=_texts(self.highs), n=list(self.counts))
        return out


def all_finite(values: Iterable[float]) -> bool:
    """One C loop over the values (their sum): NaN and inf carry through a sum, and a finite
    overflow only sends the caller the slow way. Almost every series is all finite, and a Python
    step per value was a fifth of a 50k-point chart's answer (and of a chart panel's render)."""
    return math.isfinite(sum(values))


def _texts(values: list[float]) -> list[float | str]:
    """``values`` with NaN/inf as their text."""
    if all_finite(values):
        return list(values)
    return [_text(v) for v in values]


def _text(value: float) -> float | str:
    return value if math.isfinite(value) else repr(value)


def load_series(db: Session, run_id: int, names: list[str] | None = None,
                after: int | None = None, through: int | None = None) -> dict[str, Series]:
    """Per metric name, its settled steps and values in step order (NaN/inf as logged), with
    ``after < step <= through`` when given: decoded from the run's chunks (``store.read``)."""
    return {name: Series(steps=steps.tolist(), values=values.tolist())
            for name, (steps, values) in store.read(db, run_id, names, after, through).items()}


def downsample(series: Series, max_points: int) -> Series:
    """Keep at most ``max_points`` finite points (first, last and extremes included) plus every
    NaN/inf as-is. LTTB keeps the shape and the first and last points but may skip the global
    minimum or maximum (a random walk loses one about half the time), so those two are added
    back, inside the budget once it is at least 5."""
    n = len(series.steps)
    if n <= max_points or max_points < 3:
        return series
    steps = np.asarray(series.steps, dtype=np.int64)
    values = np.asarray(series.values, dtype=np.float64)
    finite = np.isfinite(values)
    at = np.flatnonzero(finite)
    if at.size > max_points:
        budget = max(3, max_points - 2)
        keep = MinMaxLTTBDownsampler().downsample(steps[at], values[at], n_out=budget)
        extremes = [int(np.argmin(values[at])), int(np.argmax(values[at]))]
        at = np.union1d(at[keep], at[extremes])
    index = np.union1d(at, np.flatnonzero(~finite))
    return Series(steps=steps[index].tolist(), values=values[index].tolist())
