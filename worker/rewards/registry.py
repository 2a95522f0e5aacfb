"""The reward functions behind the names in ``grpodeck.contract.catalog.REWARDS``.

The catalog holds what a person picks (names, labels, parameters and their bounds) so the web
app validates a spec without this module; here each name gets its function. Each follows TRL's
calling convention: ``f(prompts, completions, **dataset_columns) -> list[float | None]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from grpodeck.contract.catalog import REWARDS
from grpodeck.contract.text import completion_text
from worker.rewards import code, text

RewardFn = Callable[..., list[float | None]]


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


def _debug_raise(after_calls: int, rank: int = -1) -> RewardFn:
    """Fails on purpose: lets a user (and our tests) check how a crashing reward is reported;
    with ``rank`` only in that process of a run on many devices (``RANK``, set by accelerate),
    the others go on (and must learn that their peer is gone)."""
    calls = {"n": 0}
    here = rank < 0 or int(os.environ.get("RANK", "0")) == rank

    def reward(completions: Sequence[Any], **_: Any) -> list[float | None]:
        calls["n"] += 1
        if here and calls["n"] > after_calls:
            raise RuntimeError(f"debug_raise: reward function failed on call {calls['n']}")
        return [0.0] * len(completions)

    return reward


def _overlong_penalty(max_length: int, soft_share: float) -> RewardFn:
    """TRL's own DAPO penalty over the completions' token ids (``completion_ids``, which
    ``GRPOTrainer`` and the dry run pass); ``max_length`` is resolved by ``build``."""
    from trl.rewards import get_soft_overlong_punishment

    punish = get_soft_overlong_punishment(max_length, max(1, round(soft_share * max_length)))

    def reward(completions: Sequence[Any], completion_ids: Sequence[Sequence[int]] | None = None,
               **_: Any) -> list[float | None]:
        if completion_ids is None:
            raise ValueError("overlong_penalty counts tokens: it needs the completion_ids "
                             "TRL passes to reward functions")
        return [float(v) for v in punish([list(ids) for ids in completion_ids])]

    return reward


FACTORIES: dict[str, Callable[..., RewardFn]] = {
    "length_target": _length_target,
    "format_tag": _format_tag,
    "exact_answer": _exact_answer,
    "constant": _constant,
    "debug_raise": _debug_raise,
    "unit_tests": code.unit_tests,
    "code_block_count": code.code_block_count,
    "format_regex": text.format_regex,
    "answer_match": text.answer_match,
    "overlong_penalty": _overlong_penalty,
    "custom": text.custom,
}
if set(FACTORIES) != set(REWARDS):  # a name in the catalog without a function, or the reverse
    raise ImportError(f"reward catalog and functions differ: {sorted(set(FACTORIES) ^ set(REWARDS))}")


def build(name: str, params: dict[str, Any], max_completion_length: int) -> RewardFn:
    """The reward ``name`` with ``params`` as ``coerce_params`` returns them (every parameter
    present: the defaults live in the catalog only, so the factories take none of their own).
    A length cap of 0 stands for the run's ``max_completion_length``, resolved here so a clone
    with a new cap keeps a penalty that follows it."""
    if params.get("max_length") == 0:
        params = {**params, "max_length": max_completion_length}
    fn = FACTORIES[name](**params)
    fn.__name__ = name  # TRL logs rewards/<__name__>/mean
    return fn


def build_rewards(spec: Any) -> list[RewardFn]:
    """A run spec's reward functions, in order, as ``GRPOTrainer(reward_funcs=...)`` takes them
    (the worker's training child and the benches that train bare TRL)."""
    return [build(r.name, r.params, spec.max_completion_length) for r in spec.rewards]
