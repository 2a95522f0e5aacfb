"""Read-only view of the diagnostics state that detectors consume (no ingestion logic)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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

    def __init__(self, metrics: dict[str, MetricHistory], context: RunContext) -> None:
        self.metrics = metrics
        self.context = context
        self._cache: dict[str, Series | None] = {}

    def hist(self, name: str) -> MetricHistory | None:
        return self.metrics.get(name)

    def series(self, name: str) -> Series | None:
        """None when the metric was never logged with a finite value."""
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
        return sorted(n for n in self.metrics if n.startswith(prefix) and n.endswith("/mean"))

    @property
    def last_step(self) -> int:
        return max((h.last_step for h in self.metrics.values() if h.first_step is not None),
                   default=0)

    @property
    def first_step(self) -> int:
        return min((h.first_step for h in self.metrics.values() if h.first_step is not None),
                   default=0)
