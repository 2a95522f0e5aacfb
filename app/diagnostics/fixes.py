"""A finding's settings fix made concrete for one run: the keys it changes, old -> new.

The declarations live next to each detector (``FIXES`` in its module, collected in
``app.diagnostics.detectors``); this module applies one to a run's settings, clamped to the run
spec's valid ranges (what the launch form accepts), keeps the spec consistent (a batch holds
whole groups), and writes the same change as a TRL ``GRPOConfig`` call for a run trained by the
user's own script. When such a run did not report a setting, TRL's default stands for it and the
change says so (``assumed``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from annotated_types import Ge, Gt, Le, Lt

from app.diagnostics.detectors import FIXES
from app.diagnostics.fix import AddReward, Fix, Settings
from grpodeck.contract.spec import RewardSpec, RunSpec

# TRL 1.16's GRPOConfig defaults for the keys a fix may change: what an outside run's script
# trains with when it did not report the setting.
TRL_DEFAULTS: dict[str, Any] = {"num_generations": 8, "beta": 0.0, "max_completion_length": 512,
                                "learning_rate": 1e-6, "temperature": 1.0}
BATCH = "per_device_train_batch_size"


@dataclass(frozen=True)
class Change:
    """One setting's change; ``assumed``: the run did not say ``old``, TRL's default stands.
    ``script``: the change as a line of the user's own TRL script when it is not a
    ``GRPOConfig`` argument (a reward function to add)."""

    key: str
    old: Any
    new: Any
    assumed: bool = False
    script: str | None = None

    @property
    def before(self) -> str:
        return shown(self.old)

    @property
    def after(self) -> str:
        return shown(self.new)


def shown(value: Any) -> str:
    """A value as the fix's table shows it: a reward list as "name x weight, ..."."""
    if isinstance(value, list):
        return ", ".join(f"{r.get('name')} ×{r.get('weight', 1.0)}" for r in value
                         if isinstance(r, dict)) or "(none reported)"
    return str(value)


@dataclass(frozen=True)
class Proposal:
    """The fix of one finding for one run."""

    category: str
    why: str
    changes: tuple[Change, ...]

    def apply(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``spec`` with the changes made (a new dict)."""
        return {**spec, **{c.key: c.new for c in self.changes}}

    def grpo_config(self) -> str:
        """The change as the user writes it in their own script: ``GRPOConfig(num_generations=16)``,
        or the line that adds a reward function."""
        config = [f"{c.key}={c.new!r}" for c in self.changes if c.script is None]
        lines = [f"GRPOConfig({', '.join(config)})"] if config else []
        return "; ".join(lines + [c.script for c in self.changes if c.script is not None])


def bounds(key: str) -> tuple[float, float, bool]:
    """(lowest, highest, whole number) the spec accepts for ``key``; an open bound (gt/lt) is
    kept out by nudging it inwards, so a clamped value always validates."""
    field = RunSpec.model_fields[key]
    low, high = -math.inf, math.inf
    for m in field.metadata:
        if isinstance(m, Ge):
            low = float(m.ge)
        elif isinstance(m, Gt):
            low = math.nextafter(float(m.gt), math.inf)
        elif isinstance(m, Le):
            high = float(m.le)
        elif isinstance(m, Lt):
            high = math.nextafter(float(m.lt), -math.inf)
    whole = field.annotation is int or field.annotation == (int | None)
    return low, high, whole


def scaled(key: str, old: float, factor: float) -> float | int:
    """``old * factor`` clamped to the spec's range for ``key`` (whole numbers stay whole)."""
    low, high, whole = bounds(key)
    new = min(max(old * factor, low), high)
    if whole:
        return int(min(max(round(new), math.ceil(low)), math.floor(high)))
    return float(f"{new:.6g}")  # 1e-05 / 2 -> 5e-06, not 4.999999999999999e-06


def _current(settings: Settings, key: str) -> tuple[Any, bool]:
    value = settings.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value, False
    return TRL_DEFAULTS.get(key, RunSpec.model_fields[key].default), True


def _rewards(settings: Settings) -> list[dict[str, Any]]:
    rewards = settings.get("rewards")
    return [r for r in rewards if isinstance(r, dict)] if isinstance(rewards, list) else []


def _added(option: AddReward, settings: Settings) -> Change | None:
    """The run's rewards with ``option``'s added at its catalog defaults; None when it has it."""
    old = _rewards(settings)
    if any(r.get("name") == option.name for r in old):
        return None
    reward = RewardSpec(name=option.name, weight=option.weight).model_dump()
    return Change("rewards", old, [*old, reward], script=option.script(settings))


def _first_change(fix: Fix, settings: Settings) -> Change | None:
    for option in fix.options:
        if isinstance(option, AddReward):
            change = _added(option, settings)
            if change is not None:
                return change
            continue
        if not option.applies(settings):
            continue
        old, assumed = _current(settings, option.key)
        new = scaled(option.key, old, option.factor)
        if new != old:
            return Change(option.key, old, new, assumed)
    return None


def whole_groups(settings: Settings, change: Change) -> Change | None:
    """A batch that no longer holds whole groups after a new group size: the next multiple of
    it (or the largest one within the spec's range); None when nothing else must change."""
    batch = settings.get(BATCH)
    if change.key != "num_generations" or not isinstance(batch, int) or batch % change.new == 0:
        return None
    high = int(bounds(BATCH)[1])
    groups = min(math.ceil(batch / change.new), high // change.new)
    return Change(BATCH, batch, groups * change.new)


def propose(category: str, settings: Settings,
            evidence: Mapping[str, Any] | None = None) -> Proposal | None:
    """The settings fix for a finding of ``category`` on a run with ``settings`` (a launched
    run's spec, or what an outside run reported); None when the category has none, every
    option is already at its bound, or the finding's ``evidence`` predicts it will not help."""
    fix = FIXES.get(category)
    if fix is not None and not fix.helps(evidence or {}):
        return None
    change = _first_change(fix, settings) if fix else None
    if fix is None or change is None:
        return None
    follow = whole_groups(settings, change)
    return Proposal(category, fix.why, (change, follow) if follow else (change,))
