"""What a settings fix is: the change of a run's settings that a finding's remedy names.

Each detector module declares its own ``FIXES`` (finding category -> ``Fix``) next to the
detector, as it declares its thresholds and actions: the remedy and the change that carries it
out stay in one place per category, never in a template. ``app.diagnostics.fixes`` turns a
declaration and a run's settings into the concrete change ("num_generations 4 -> 8").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Settings = Mapping[str, Any]


def always(settings: Settings) -> bool:
    """A ``Scale`` that applies whatever the settings."""
    return True


@dataclass(frozen=True)
class Scale:
    """Multiply one setting (a RunSpec / TRL ``GRPOConfig`` name) by ``factor``, within the
    spec's bounds, when ``applies(settings)`` holds."""

    key: str
    factor: float
    applies: Callable[[Settings], bool] = always


@dataclass(frozen=True)
class AddReward:
    """Add a reward function (a ``grpodeck.contract.catalog.REWARDS`` name) to the run's
    rewards, unless it already has it; ``script(settings)`` is the same change as a line of a
    TRL script, for a run the user trains with their own code."""

    name: str
    script: Callable[[Settings], str]
    weight: float = 1.0


def any_finding(evidence: Mapping[str, Any]) -> bool:
    """A ``Fix`` that helps whatever its finding's evidence says."""
    return True


@dataclass(frozen=True)
class Fix:
    """A category's settings fix: the first of ``options`` that applies and changes the run
    (one already at its bound, a reward it already has, falls through to the next); ``why``
    says what it should do. ``helps(evidence)``: False where the finding's own figures predict
    the change will not help (issue 54: a larger group for groups that all score exactly 0)."""

    why: str
    options: tuple[Scale | AddReward, ...]
    helps: Callable[[Mapping[str, Any]], bool] = any_finding
