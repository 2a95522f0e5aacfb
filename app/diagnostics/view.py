"""Read-only view of the diagnostics state that detectors consume (no ingestion logic)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.diagnostics.detector import Detector, UndeclaredMetric
from app.diagnostics.history import MetricHistory
from app.diagnostics.model import RunContext


@dataclass
class Series:
    """Spike-free bucket means of one metric, by step (mean step of each bucket)."""

    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def span(self) -> float:
        return float(self.steps[-1] - self.steps[0]) if len(self.steps) else 0.0

    @property
    def first(self) -> int:
        return round(self.steps[0])

    @property
    def last(self) -> int:
        return round(self.steps[-1])

    def between(self, lo: float, hi: float) -> Series:
        m = (self.steps >= lo) & (self.steps <= hi)
        return Series(self.steps[m], self.values[m])


class View:
    """What detectors may look at: series, extents, non-finite counts, spikes, context."""

    def __init__(self, metrics: dict[str, MetricHistory], context: RunContext,
                 detector: Detector | None = None,
                 cache: dict[str, Series | None] | None = None) -> None:
        self.metrics = metrics
        self.context = context
        self.detector = detector
        self._cache: dict[str, Series | None] = {} if cache is None else cache

    def scoped(self, detector: Detector) -> View:
        """The same data, readable only through ``detector``'s declared metrics (shared cache)."""
        return View(self.metrics, self.context, detector, self._cache)

    def _check(self, name: str) -> None:
        if self.detector is not None and not self.detector.declares(name):
            raise UndeclaredMetric(f"detector {self.detector.name!r} read {name!r} without "
                                   "declaring it in its reads")

    def hist(self, name: str) -> MetricHistory | None:
        self._check(name)
        return self.metrics.get(name)

    def series(self, name: str) -> Series | None:
        """None when the metric was never logged with a finite value."""
        self._check(name)
        if name not in self._cache:
            h = self.metrics.get(name)
            s = None
            if h is not None and len(h.cnt):
                steps, values = h.series()
                s = Series(steps, values)
            self._cache[name] = s
        return self._cache[name]

    def components(self, eval_: bool = False) -> list[str]:
        """Reward component names (``rewards/<f>/mean``), train or eval."""
        prefix = "eval_rewards/" if eval_ else "rewards/"
        names = sorted(n for n in self.metrics if n.startswith(prefix) and n.endswith("/mean"))
        for n in names[:1]:
            self._check(n)
        return names

    @property
    def last_step(self) -> int:
        return max((h.last_step for h in self.metrics.values() if h.first_step is not None),
                   default=0)

    @property
    def first_step(self) -> int:
        return min((h.first_step for h in self.metrics.values() if h.first_step is not None),
                   default=0)
