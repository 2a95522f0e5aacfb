"""Which metrics go on which chart. Pure data: the run page and the tests read the same table.

Names are TRL's current ones; older names are mapped to these at import (app.metrics.names).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    metrics: tuple[str, ...]  # exact names; a trailing '*' matches a prefix
    secondary: tuple[str, ...] = ()  # drawn on a right-hand axis (ratios next to lengths)


PANELS: tuple[Panel, ...] = (
    Panel("reward", "Reward (train and eval)", ("reward", "eval_reward")),
    Panel("components", "Reward components", ("rewards/*/mean",)),
    Panel("spread", "Reward spread within groups", ("reward_std",), ("frac_reward_zero_std",)),
    Panel("entropy", "Entropy", ("entropy",)),
    Panel("kl", "KL to reference", ("kl",)),
    Panel("length", "Completion length (tokens)",
          ("completions/mean_length", "completions/min_length", "completions/max_length",
           "completions/mean_terminated_length"),
          ("completions/clipped_ratio",)),
    Panel("clip", "Clip ratio", ("clip_ratio/region_mean", "clip_ratio/low_mean",
                                 "clip_ratio/high_mean")),
    Panel("rollouts", "Rollout signals (captured steps)",
          ("rollouts/repetition", "rollouts/identical_group_frac", "rollouts/empty_frac")),
    Panel("grad_norm", "Gradient norm", ("grad_norm",)),
    Panel("loss", "Loss", ("loss",)),
    Panel("learning_rate", "Learning rate", ("learning_rate",)),
)


def matches(pattern: str, name: str) -> bool:
    if "*" not in pattern:
        return pattern == name
    head, tail = pattern.split("*", 1)
    return name.startswith(head) and name.endswith(tail) and len(name) > len(head) + len(tail)


def names_for(panel: Panel, available: list[str]) -> tuple[list[str], list[str]]:
    """The primary- and secondary-axis metric names this panel draws, in table order."""
    def pick(patterns: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for pattern in patterns:
            out += [n for n in available if matches(pattern, n) and n not in out]
        return out
    return pick(panel.metrics), pick(panel.secondary)
