"""Groups GRPO actually scored, with the trainer's own rewards and advantages, in the wire shape
(``grpodeck.contract.wire.RolloutStep``). Shared by the worker's capturing trainer and the
client's ``DeckCallback``; pure Python (no torch), so a client can use it on any node.

From a stock ``trl.GRPOTrainer`` the callback reads ``trainer._logs`` (the deques TRL fills in
``_generate_and_score_completions`` for its completion tables): a private attribute, so when a TRL
version changes its shape ``from_trainer_logs`` raises ``CaptureUnavailable`` and the callback
goes on with metrics only. Token lengths and truncation are not in ``_logs``: they stay unknown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from grpodeck.contract.text import clip, completion_text, render_messages


class CaptureUnavailable(Exception):
    """The trainer does not hold what capture reads (another TRL version): metrics only."""


def _num(x: Any) -> float | None:
    x = float(x) if x is not None else math.nan
    return None if math.isnan(x) else x


def weighted_total(rewards: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """TRL's total: nansum of weight * component; None when every component is None/NaN."""
    terms = [w * r for r, w in zip(rewards, weights, strict=True)
             if r is not None and not math.isnan(r)]
    return float(sum(terms)) if terms else None


def _completion(batch: dict[str, Any], names: list[str], weights: Sequence[float],
                i: int) -> dict[str, Any]:
    comps = [_num(batch["rewards"][n][i]) for n in names]
    lengths, truncated = batch.get("lengths"), batch.get("truncated")
    return {"text": clip(completion_text(batch["completions"][i])),
            "rewards": dict(zip(names, comps, strict=True)),
            "total": weighted_total(comps, weights),
            "advantage": _num(batch["advantages"][i]),
            "length": int(lengths[i]) if lengths is not None else None,
            "truncated": bool(truncated[i]) if truncated is not None else None,
            **_reasons(batch.get("reasons", {}), i)}


def _reasons(columns: dict[str, list[Any]], i: int) -> dict[str, dict[str, str]]:
    """``{"reasons": {reward: why}}`` for row ``i`` when a reward gave one (the worker's code
    rewards explain a zero: "no code block", "timeout"...), else nothing."""
    found = {name: str(values[i]) for name, values in columns.items() if values[i]}
    return {"reasons": found} if found else {}


def build_groups(batch: dict[str, Any], num_generations: int, max_groups: int,
                 weights: Sequence[float]) -> list[dict[str, Any]]:
    """The first ``max_groups`` groups of a snapshot (completions of a prompt are consecutive);
    ``lengths``/``truncated`` are optional (unknown from a stock trainer)."""
    names = list(batch["rewards"])
    groups = []
    for g in range(min(max_groups, len(batch["prompts"]) // num_generations)):
        rows = range(g * num_generations, (g + 1) * num_generations)
        prompt = clip(render_messages(batch["prompts"][g * num_generations]))
        groups.append({"index": g, "prompt": prompt,
                       "completions": [_completion(batch, names, weights, i) for i in rows]})
    return groups


def from_trainer_logs(trainer: Any, max_groups: int) -> list[dict[str, Any]]:
    """The latest generation batch's first groups, read from a stock GRPOTrainer's ``_logs``."""
    try:
        logs, k = trainer._logs, int(trainer.num_generations)
        n = (len(logs["prompt"]) // k) * k
        names = list(trainer.reward_func_names)
        weights = [float(w) for w in trainer.reward_weights.tolist()]
        tail = slice(len(logs["prompt"]) - n, None)
        batch = {"prompts": list(logs["prompt"])[tail],
                 "completions": list(logs["completion"])[tail],
                 "rewards": {name: list(logs["rewards"][name])[tail] for name in names},
                 "advantages": list(logs["advantages"])[tail]}
        if any(len(v) != n for v in (batch["completions"], batch["advantages"],
                                     *batch["rewards"].values())):
            raise CaptureUnavailable("trainer logs are not aligned")
        return build_groups(batch, k, max_groups, weights)
    except (AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise CaptureUnavailable(f"{type(exc).__name__}: {exc}") from exc
