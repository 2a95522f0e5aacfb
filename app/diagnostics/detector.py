"""What a detector is: a name, the metrics it reads, and a pure function of the view.

Why declarations: the state keeps history only for the metrics some detector reads (bounded
memory per run), and that list is built from these declarations, so a new detector can never
silently get ``None`` for a metric nobody thought to add to a hand list. The view a detector
receives is scoped to its declaration: reading an undeclared metric raises
``UndeclaredMetric`` at once (tests run every detector, so a missing declaration fails them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from app.diagnostics.model import Finding

COMPONENTS = "rewards/*/mean"  # every train reward component, as the state names them
EVAL_COMPONENTS = "eval_rewards/*/mean"


@dataclass(frozen=True)
class Detector:
    """``fn(view) -> findings``; ``reads`` are canonical metric names or ``*`` patterns.

    ``needs``: the check runs only when at least one of these was read; empty means the
    first of ``reads`` (the metric a detector cannot work without; later reads refine it).
    A diagnosis lists every detector whose needs were not met as "could not check"."""

    name: str
    reads: tuple[str, ...]
    fn: Callable  # (View) -> list[Finding]
    needs: tuple[str, ...] = ()
    # The least a run must span (steps) and hold (logged rows of the needed metric) for this
    # check's rule to judge it; a shorter run lists the check as unchecked with the reason
    # ("39 steps; needs 50"), so a short run is never silently healthy (issue 54).
    min_steps: int = 0
    min_points: int = 0

    def __call__(self, view) -> list[Finding]:
        return self.fn(view)

    def declares(self, metric: str) -> bool:
        """True when ``metric`` is one of the names or patterns this detector reads."""
        return any(metric == r or ("*" in r and fnmatchcase(metric, r)) for r in self.reads)


    @property
    def required(self) -> tuple[str, ...]:
        """Metrics of which one must have been read for this check to mean anything."""
        return self.needs or self.reads[:1]

    def can_check(self, names: frozenset[str] | set[str]) -> bool:
        """True when some metric in ``names`` (canonical names read) meets ``required``."""
        return any(n == r or ("*" in r and fnmatchcase(n, r)) for r in self.required
                   for n in names)


    @property
    def bounded(self) -> bool:
        """True when the check declares a least span or row count (``too_short`` can say no)."""
        return bool(self.min_steps or self.min_points)

    def too_short(self, span: int, rows: int) -> str | None:
        """Why a run of ``span`` steps and ``rows`` rows is too short for this check, or None."""
        if self.min_steps and span < self.min_steps:
            return f"{span} steps; needs {self.min_steps}"
        if self.min_points and rows < self.min_points:
            return f"{rows} rows; needs {self.min_points}"
        return None


class UndeclaredMetric(KeyError):
    """A detector read a metric it did not declare (a bug in the detector's declaration)."""
