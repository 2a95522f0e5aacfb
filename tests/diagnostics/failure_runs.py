"""Labelled synthetic failing runs: each made to fail one way from a known onset step.

Used by the pattern tests (tests/diagnostics/test_failure_runs.py) and by
``bench/lead_time.py`` (how many steps after the onset each finding first fires when the
rows arrive one logging step at a time). Every run is a healthy run (conftest.healthy_cols)
with the failure written over it, fixed seeds, so the expectation is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from app.diagnostics import RunContext
from tests.diagnostics.conftest import healthy_cols, rows_from


@dataclass(frozen=True)
class Labelled:
    """A run, the step its failure begins, the finding it must raise and how severe."""

    rows: list[tuple[int, dict]]
    context: RunContext | None
    onset: int
    category: str
    severity: str
    last_step: int


def ramp(steps: np.ndarray, start: int, end: int) -> np.ndarray:
    """0 before ``start``, 1 after ``end``, linear between."""
    return np.clip((steps - start) / max(end - start, 1), 0.0, 1.0)


def _run(steps, cols, onset, category, severity, context=None) -> Labelled:
    return Labelled(rows_from(steps, **cols), context, onset, category, severity,
                    int(steps[-1]))


def _hacking_base(seed: int, every: int = 2) -> tuple[np.ndarray, dict, np.random.Generator]:
    steps, c = healthy_cols(300, every, seed)
    return steps, c, np.random.default_rng(seed + 100)


def hack_total_rises() -> Labelled:
    """Format climbs while accuracy falls from step 120; the total still rises."""
    steps, c, r = _hacking_base(31)
    k = len(steps)
    fmt = 0.1 + 0.9 * ramp(steps, 40, 200) + r.normal(0, 0.03, k)
    acc = 0.55 - 0.35 * ramp(steps, 120, 260) + r.normal(0, 0.03, k)
    c.update({"rewards/format/mean": fmt, "rewards/accuracy/mean": acc, "reward": fmt + acc})
    return _run(steps, c, 120, "reward_hacking", "warning")


def hack_total_flat() -> Labelled:
    """Style rises exactly as much as correctness falls: the total stays flat."""
    steps, c, r = _hacking_base(32)
    k = len(steps)
    move = 0.45 * ramp(steps, 100, 260)
    style = 0.3 + move + r.normal(0, 0.03, k)
    corr = 0.7 - move + r.normal(0, 0.03, k)
    c.update({"rewards/style/mean": style, "rewards/correctness/mean": corr,
              "reward": style + corr})
    c.pop("rewards/format/mean"), c.pop("rewards/accuracy/mean")
    return _run(steps, c, 100, "reward_hacking", "warning")


def hack_saturated_total_falls() -> Labelled:
    """The format reward saturated early and sits at its maximum; from step 120 the pass
    rate falls and the total falls with it."""
    steps, c, r = _hacking_base(33)
    k = len(steps)
    fmt = np.minimum(1.0, 0.4 + 0.6 * ramp(steps, 1, 40) + np.abs(r.normal(0, 0.005, k)))
    acc = 0.6 - 0.45 * ramp(steps, 120, 220) + r.normal(0, 0.03, k)
    c.update({"rewards/format/mean": fmt, "rewards/pass_rate/mean": acc, "reward": fmt + acc})
    c.pop("rewards/accuracy/mean")
    return _run(steps, c, 120, "reward_hacking", "warning")


def hack_monitor_objective() -> Labelled:
    """The seed's third experiment: reward = "has 4 code blocks" (weight 1), unit tests
    monitored only (weight 0). Blocks rise, tests fall below zero; the total is blocks only."""
    steps, c, r = _hacking_base(34)
    k = len(steps)
    blocks = 0.2 + 0.75 * ramp(steps, 30, 150) + r.normal(0, 0.03, k)
    tests = 0.3 - 0.5 * ramp(steps, 80, 200) + r.normal(0, 0.03, k)
    c.update({"rewards/code_blocks/mean": blocks, "rewards/unit_tests/mean": tests,
              "reward": blocks})
    c.pop("rewards/format/mean"), c.pop("rewards/accuracy/mean")
    ctx = RunContext(reward_weights={"code_blocks": 1.0, "unit_tests": 0.0})
    return _run(steps, c, 80, "reward_hacking", "warning", ctx)


def collapse_from_peak() -> Labelled:
    """Reward rises to a peak at step 120, falls back below its start by 170, stays."""
    steps, c, r = _hacking_base(35)
    k = len(steps)
    up, down = ramp(steps, 10, 120), ramp(steps, 120, 170)
    reward = 0.3 + 0.8 * up - 0.9 * down + r.normal(0, 0.04, k)
    c.update({"reward": reward, "rewards/accuracy/mean": reward - c["rewards/format/mean"]})
    return _run(steps, c, 120, "reward_collapse", "critical")


def length_collapse_sudden() -> Labelled:
    """Completions drop from ~300 to ~25 tokens within three logging steps at step 150
    (the model stopped writing its reasoning) and stay short; the reward does not rise."""
    steps, c, r = _hacking_base(36, every=5)
    k = len(steps)
    c["completions/mean_length"] = np.where(steps < 150, 300.0, 25.0) + r.normal(0, 6, k)
    c["completions/mean_length"][(steps >= 150) & (steps < 165)] = [160.0, 70.0, 30.0]
    c["reward"] = 0.9 + r.normal(0, 0.05, k)
    return _run(steps, c, 150, "length_collapse", "warning")


def length_and_entropy_collapse() -> Labelled:
    """The same drop with entropy collapsing at the same steps: degenerate short output."""
    run = length_collapse_sudden()
    steps = np.array([s for s, _ in run.rows])
    ent = np.where(steps < 150, 0.9, 0.05) + np.random.default_rng(37).normal(0, 0.01, len(steps))
    rows = [(s, {**d, "entropy": float(e)}) for (s, d), e in zip(run.rows, ent, strict=True)]
    return Labelled(rows, None, 150, "length_collapse", "critical", run.last_step)


def truncation_disappears() -> Labelled:
    """Benign: at first 70% of completions hit the 1024 cap; the model learns to finish
    (clipped ratio to 0, length 1000 -> 150) while the reward rises. Info at most."""
    steps, c, r = _hacking_base(38, every=5)
    k = len(steps)
    done = ramp(steps, 60, 120)
    c["completions/mean_length"] = 1000 - 850 * done + r.normal(0, 10, k)
    c["completions/clipped_ratio"] = np.clip(0.7 * (1 - done) + r.normal(0, 0.01, k), 0, 1)
    return _run(steps, c, 100, "length_collapse", "info",  # below 35% of the start from ~105
                RunContext(max_completion_length=1024))


def entropy_collapse_zero_spread() -> Labelled:
    """Entropy collapses from step 100 and most groups then score all-equal: cannot learn.
    Each is a warning on its own (entropy at 22% of its start, 85% zero-spread groups)."""
    steps, c, r = _hacking_base(39)
    k = len(steps)
    gone = ramp(steps, 100, 130)
    c["entropy"] = 0.9 - 0.7 * gone + r.normal(0, 0.01, k)  # 22%: a warning on its own
    c["frac_reward_zero_std"] = np.clip(0.3 + 0.55 * gone + r.normal(0, 0.02, k), 0, 1)
    c["reward"] = 0.6 + r.normal(0, 0.04, k)
    return _run(steps, c, 100, "entropy_collapse", "critical")


def entropy_blowup_at_cap() -> Labelled:
    """Entropy triples from step 120 while completions run into the 512 cap: random text."""
    steps, c, r = _hacking_base(40)
    k = len(steps)
    up = ramp(steps, 120, 160)
    c["entropy"] = 0.8 + 1.6 * up + r.normal(0, 0.03, k)
    c["completions/clipped_ratio"] = np.clip(0.02 + 0.9 * up + r.normal(0, 0.02, k), 0, 1)
    c["completions/mean_length"] = 250 + 250 * up + r.normal(0, 5, k)
    return _run(steps, c, 120, "entropy_blowup", "critical",
                RunContext(max_completion_length=512))


def kl_sustained() -> Labelled:
    """KL climbs past 1 from step 100 and stays high for the rest of the run."""
    steps, c, r = _hacking_base(41)
    k = len(steps)
    c["kl"] = 0.01 + 2.5 * ramp(steps, 100, 180) + np.abs(r.normal(0, 0.02, k))
    return _run(steps, c, 100, "kl_blowup", "critical")


RUNS: dict[str, Callable[[], Labelled]] = {f.__name__: f for f in (
    hack_total_rises, hack_total_flat, hack_saturated_total_falls, hack_monitor_objective,
    collapse_from_peak, length_collapse_sudden, length_and_entropy_collapse,
    truncation_disappears, entropy_collapse_zero_spread, entropy_blowup_at_cap, kl_sustained)}
