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


class UndeclaredMetric(KeyError):
    """A detector read a metric it did not declare (a bug in the detector's declaration)."""
