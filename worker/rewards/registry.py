"""Reward functions a run can use, by name.

Kept free of torch/transformers imports so the web app can validate a run spec against the
registry without loading any ML stack. Each reward follows TRL's calling convention:
``f(prompts, completions, **dataset_columns) -> list[float | None]``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.rollouts.signals import render_messages

RewardFn = Callable[..., list[float | None]]


@dataclass(frozen=True)
class RewardParam:
    """One tunable parameter of a reward function, with the bounds the form enforces."""

    name: str
    kind: type
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None


# A text parameter (a tag name) is short; numbers must be finite (a NaN target scores nothing).
MAX_PARAM_TEXT = 200


@dataclass(frozen=True)
class RewardDef:
    name: str
    label: str
    help: str
    factory: Callable[..., RewardFn]
    params: tuple[RewardParam, ...] = field(default_factory=tuple)

    def build(self, params: dict[str, Any]) -> RewardFn:
        """``params`` as ``coerce_params`` returns them: every parameter present (the defaults
        live in ``RewardParam`` only, so the factories take no defaults of their own)."""
        fn = self.factory(**params)
        fn.__name__ = self.name  # TRL logs rewards/<__name__>/mean
        return fn


def completion_text(completion: Any) -> str:
    """TRL passes plain strings for text datasets and message lists for chat datasets; the
    reward sees the same text the rollout inspector shows."""
    return render_messages(completion, roles=False)


def _length_target(target: int) -> RewardFn:
    def reward(completions: Sequence[Any], **_: Any) -> list[float | None]:
        return [-abs(len(completion_text(c)) - target) / target for c in completions]

    return reward


def _format_tag(tag: str) -> RewardFn:
    pattern = re.compile(rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>", re.DOTALL)

    def reward(completions: Sequence[Any], **_: Any) -> list[float | None]:
        return [1.0 if pattern.search(completion_text(c)) else 0.0 for c in completions]

    return reward


def _exact_answer() -> RewardFn:
    def reward(completions: Sequence[Any], answer: Sequence[Any] | None = None, **_: Any):
        if answer is None:
            raise ValueError("exact_answer needs an 'answer' column in the dataset")
        out: list[float | None] = []
        for c, a in zip(completions, answer, strict=True):
            numbers = re.findall(r"-?\d+(?:\.\d+)?", completion_text(c))
            out.append(1.0 if numbers and numbers[-1] == str(a).strip() else 0.0)
        return out

    return reward


def _constant(value: float) -> RewardFn:
    def reward(completions: Sequence[Any], **_: Any) -> list[float | None]:
        return [float(value)] * len(completions)

    return reward


def _debug_raise(after_calls: int) -> RewardFn:
    """Fails on purpose: lets a user (and our tests) check how a crashing reward is reported."""
    calls = {"n": 0}

    def reward(completions: Sequence[Any], **_: Any) -> list[float | None]:
        calls["n"] += 1
        if calls["n"] > after_calls:
            raise RuntimeError(f"debug_raise: reward function failed on call {calls['n']}")
        return [0.0] * len(completions)

    return reward


REWARDS: dict[str, RewardDef] = {
    d.name: d
    for d in [
        RewardDef(
            "length_target", "Length close to target",
            "The seed's dummy reward: minus the distance of the completion's length in "
            "characters from the target, divided by the target.",
            _length_target,
            (RewardParam("target", int, 20, "target length in characters", minimum=1,
                         maximum=1_000_000),),
        ),
        RewardDef(
            "format_tag", "Has <tag>...</tag>",
            "1 when the completion contains <tag>...</tag>, else 0.",
            _format_tag,
            (RewardParam("tag", str, "answer", "tag name"),),
        ),
        RewardDef(
            "exact_answer", "Last number equals answer",
            "1 when the last number in the completion equals the dataset's 'answer' column.",
            _exact_answer,
        ),
        RewardDef(
            "constant", "Constant",
            "Always the same value: no spread, teaches nothing (useful to see a stall).",
            _constant,
            (RewardParam("value", float, 0.0, "the reward every completion gets",
                         minimum=-1e6, maximum=1e6),),
        ),
        RewardDef(
            "debug_raise", "Raise an error (debug)",
            "Raises after N calls: checks how a failing reward function is reported.",
            _debug_raise,
            (RewardParam("after_calls", int, 0, "successful calls before it raises", minimum=0,
                         maximum=1_000_000_000),),
        ),
    ]
}


def coerce_params(reward: RewardDef, params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and convert types; raise ValueError naming the offending parameter."""
    known = {p.name: p for p in reward.params}
    unknown = set(params) - set(known)
    if unknown:
        raise ValueError(f"unknown parameter(s) for {reward.name}: {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    for p in reward.params:
        raw = params.get(p.name, p.default)
        try:
            value = p.kind(raw)
        except (TypeError, ValueError, OverflowError):  # int(inf) overflows
            raise ValueError(f"{reward.name}.{p.name} must be a {p.kind.__name__}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{reward.name}.{p.name} must be a finite number")
        if isinstance(value, str) and len(value) > MAX_PARAM_TEXT:
            raise ValueError(f"{reward.name}.{p.name} must be at most {MAX_PARAM_TEXT} characters")
        if p.minimum is not None and value < p.minimum:
            raise ValueError(f"{reward.name}.{p.name} must be >= {p.minimum}")
        if p.maximum is not None and value > p.maximum:
            raise ValueError(f"{reward.name}.{p.name} must be <= {p.maximum}")
        out[p.name] = value
    return out
