"""Which metrics go on which chart, and how each chart's axes read. Pure data: the run page and
the tests read the same table.

Names are TRL's current ones; older names are mapped to these at import (app.metrics.names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    metrics: tuple[str, ...]  # exact names; a trailing '*' matches a prefix
    secondary: tuple[str, ...] = ()  # a share (0..1) drawn on a right-hand percent axis
    y_title: str = ""  # the left axis' title: what the numbers are
    y2_title: str = ""  # the right axis' title (panels with secondary metrics)
    percent: bool = False  # the left axis holds shares (0..1): percent ticks, 0..100 %
    log_toggle: bool = False  # offer a log scale (heavy-tailed, positive metrics)
    title_without: tuple[str, str] = ("", "")  # (metric, title): the title when it is absent
    group: str = "training"  # charts of one group sit together; a new group opens with its title
    byte_ticks: bool = False  # the values are bytes: ticks read in KiB / MiB / GiB (charts.js)


# The chart groups' titles, shown above a group's first chart (the training group needs none).
GROUP_TITLES = {"system": "System (the training process: CPU, memory, GPU, throughput)"}


PANELS: tuple[Panel, ...] = (
    Panel("reward", "Reward (train and eval)", ("reward", "eval_reward"), y_title="mean reward",
          title_without=("eval_reward", "Reward")),
    Panel("components", "Reward components", ("rewards/*/mean",), y_title="mean reward"),
    Panel("spread", "Reward spread within groups", ("reward_std",), ("frac_reward_zero_std",),
          y_title="reward std", y2_title="groups with zero spread"),
    Panel("entropy", "Entropy", ("entropy",), y_title="mean token entropy"),
    Panel("kl", "KL to reference", ("kl",), y_title="KL", log_toggle=True),
    Panel("length", "Completion length (tokens)",
          ("completions/mean_length", "completions/min_length", "completions/max_length",
           "completions/mean_terminated_length"), y_title="tokens"),
    # a share, not a token count: its own chart rather than a second axis on the lengths
    Panel("truncated", "Truncated completions", ("completions/clipped_ratio",),
          y_title="share hitting max length", percent=True),
    Panel("clip", "Clip ratio", ("clip_ratio/region_mean", "clip_ratio/low_mean",
                                 "clip_ratio/high_mean"), y_title="share of tokens clipped",
          percent=True),
    Panel("rollouts", "Rollout signals (captured steps)",
          ("rollouts/repetition", "rollouts/identical_group_frac", "rollouts/empty_frac"),
          y_title="share", percent=True),
    Panel("grad_norm", "Gradient norm", ("grad_norm",), y_title="L2 norm", log_toggle=True),
    Panel("loss", "Loss", ("loss",), y_title="loss"),
    Panel("learning_rate", "Learning rate", ("learning_rate",), y_title="learning rate"),
    # system/* (grpodeck.client.system samples them on the reporting process); CPU first: every
    # sample has it, so the group's title always opens on the same chart
    Panel("system_cpu", "CPU (training process)", ("system/cpu_percent",),
          y_title="% of one core", group="system"),
    Panel("system_rss", "Resident memory (training process)", ("system/rss_bytes",),
          y_title="memory", group="system", byte_ticks=True),
    Panel("system_gpu_memory", "GPU memory (torch allocator)",
          ("system/gpu*/mem_reserved_bytes", "system/gpu*/mem_allocated_bytes",
           "system/gpu*/mem_total_bytes"), y_title="memory", group="system", byte_ticks=True),
    Panel("system_gpu_util", "GPU utilisation", ("system/gpu*/util_percent",),
          y_title="% busy", group="system"),
    Panel("system_throughput", "Throughput", ("system/tokens_per_s",), y_title="tokens / s",
          group="system"),
)


def objective_panel(objectives: Sequence[str]) -> Panel | None:
    """The true objective a run only watches (monitor-only rewards, weight 0) drawn against the
    reward it trains on, on one chart: the reward-hacking picture (proxy up, objective flat or
    down) without comparing two charts' axes by eye. None for a run without one."""
    if not objectives:
        return None
    return Panel("objective", f"Objective ({', '.join(objectives)}, weight 0) vs trained reward",
                 ("reward", *(f"rewards/{name}/mean" for name in objectives)),
                 y_title="mean reward")


def panels_for(objectives: Sequence[str] = ()) -> tuple[Panel, ...]:
    """The run page's charts in order: the objective chart, when there is one, after the
    reward's."""
    extra = objective_panel(objectives)
    return PANELS if extra is None else (PANELS[0], extra, *PANELS[1:])


def monitor_only(spec: dict[str, Any] | None) -> list[str]:
    """Names of a run's monitor-only rewards (weight 0) from its stored spec; none for imported
    and outside runs, whose specs list no rewards."""
    rewards = (spec or {}).get("rewards")
    if not isinstance(rewards, list):
        return []
    return [r["name"] for r in rewards if isinstance(r, dict) and isinstance(r.get("name"), str)
            and r.get("weight", 1.0) == 0]


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


def title_for(panel: Panel, available: list[str]) -> str:
    """The panel's title for what the run logged ("Reward", not "(train and eval)", without
    eval)."""
    metric, shorter = panel.title_without
    return shorter if metric and metric not in available else panel.title
