"""Shapes a person reads at a glance that the diagnostics used to misread (issue 23): exact
zero spread in short or old logs, spikes that are the only real updates, a stall that starts
where the plateau starts, a collapse from a long climb's peak, and two components pulling
apart with no objective named. General rules: no thresholds fitted to one file."""

from __future__ import annotations

import numpy as np

from app.diagnostics import diagnose
from app.diagnostics.model import Finding


def _only(findings: list[Finding], category: str) -> Finding:
    (f,) = [f for f in findings if f.category == category and f.severity != "info"]
    return f


def test_old_log_with_reward_std_exactly_zero_on_most_steps_is_zero_spread() -> None:
    """No frac_reward_zero_std (old TRL): reward_std == 0 on a step means no group had spread;
    three steps in four like that is zero spread, though no single number says 'fraction'."""
    rows = [(s, {"reward": 0.9 if s % 4 == 1 else 1.0, "reward_std": 0.2 if s % 4 == 1 else 0.0,
                 "loss": 0.0}) for s in range(1, 101)]
    f = _only(diagnose(rows).findings, "zero_reward_spread")
    assert f.metric == "reward_std" and f.severity == "critical"
    assert "reward_std is exactly 0" in f.summary and "76% of steps" in f.summary  # 75 of 99 since step 2


def test_a_reward_std_that_is_small_but_not_zero_is_not_zero_spread() -> None:
    rows = [(s, {"reward": 1.0, "reward_std": 0.01, "loss": 0.0}) for s in range(1, 101)]
    assert "zero_reward_spread" not in diagnose(rows).categories


def test_grad_norm_spikes_on_the_only_steps_with_spread_are_zero_spread() -> None:
    """Most steps have no spread, so no advantage and a near-zero gradient; the few with
    spread give ordinary updates that look like spikes: not numerical instability."""
    noise = np.random.default_rng(4)
    spread = {12, 33, 57, 70}
    rows = [(s, {"reward": 0.6 if s in spread else 0.0,
                 "frac_reward_zero_std": 0.75 if s in spread else 1.0,
                 "grad_norm": 1.5 if s in spread else 0.001 + abs(noise.normal(0, 2e-4)),
                 "loss": 0.0}) for s in range(1, 81)]
    d = diagnose(rows)
    assert "numerical_instability" not in d.categories
    (note,) = [f for f in d.findings if f.metric == "grad_norm"]
    assert note.category == "zero_reward_spread" and note.severity == "info"
    assert note.evidence["spike_steps_with_spread"] == sorted(spread)


def test_grad_norm_spikes_on_steps_without_spread_are_still_instability() -> None:
    noise = np.random.default_rng(4)
    spikes = {12, 33, 57, 70}
    rows = [(s, {"reward": 0.3 + noise.normal(0, 0.05), "frac_reward_zero_std": 0.2,
                 "grad_norm": 8.0 if s in spikes else 0.3 + abs(noise.normal(0, 0.02)),
                 "loss": 0.0}) for s in range(1, 81)]
    f = _only(diagnose(rows).findings, "numerical_instability")
    assert f.metric == "grad_norm"


def test_a_stall_starts_where_the_plateau_starts() -> None:
    """The reward climbs from -10 to 0 until step 60, then stays flat to step 1000: the
    stall is from about step 60, not from the first logged step while it still climbed."""
    noise = np.random.default_rng(1)
    steps = np.arange(10, 1001, 10)
    reward = -10 + 10 * np.minimum(steps, 60) / 60 + noise.normal(0, 0.3, len(steps))
    f = _only(diagnose([(int(s), {"reward": float(r)}) for s, r in zip(steps, reward)]).findings,
              "stalled")
    assert 50 <= f.first_step <= 80 and f.last_step == 1000
    assert f"from step {f.first_step}" in f.summary


def test_a_long_climb_that_falls_most_of_the_way_back_is_a_collapse_from_its_peak() -> None:
    """A noisy reward climbs for 120 steps, then falls most of the way back while completions
    grow: a collapse from its peak (single noisy points cross the midpoint), not a stall."""
    noise = np.random.default_rng(2)
    steps = np.arange(10, 301, 10)
    reward = np.where(steps <= 120, 0.1 + steps / 120,
                      1.1 - 0.9 * np.minimum(1, (steps - 120) / 108))
    reward = reward + noise.normal(0, 0.3, len(steps))
    length = np.where(steps <= 120, 300.0, 300 + 500 * (steps - 120) / 180)
    d = diagnose([(int(s), {"reward": float(r), "completions/mean_length": float(n)})
                  for s, r, n in zip(steps, reward, length)])
    f = _only(d.findings, "reward_collapse")
    assert 80 <= f.first_step <= 160
    assert "stalled" not in d.categories


def test_one_component_rising_while_another_falls_without_an_objective_is_hacking() -> None:
    """No weight-0 component and no name like 'correctness': two neutral components pulling
    apart in the second half of the run, total reward flat."""
    noise = np.random.default_rng(3)
    steps = np.arange(1, 401)
    t = np.clip((steps / 400 - 0.5) / 0.5, 0, 1)
    style = 0.2 + 0.6 * t + noise.normal(0, 0.03, len(steps))
    judge = 0.7 - 0.45 * t + noise.normal(0, 0.03, len(steps))
    d = diagnose([(int(s), {"reward": float(a + b), "rewards/style/mean": float(a),
                            "rewards/judge/mean": float(b)})
                  for s, a, b in zip(steps, style, judge)])
    f = _only(d.findings, "reward_hacking")
    assert f.metric == "rewards/judge/mean" and "style" in f.evidence["rising"]


def test_three_rows_without_spread_after_a_long_healthy_stretch_are_not_judged_at_once() -> None:
    """The exact signal needs no window only when it is most of the run: three late rows at
    1.0 after 60 healthy ones wait for the windowed judgement."""
    rows = [(s, {"reward": 0.3 + s / 200, "frac_reward_zero_std": 0.1, "loss": 0.0})
            for s in range(1, 61)]
    rows += [(s, {"reward": 0.6, "frac_reward_zero_std": 1.0, "loss": 0.0}) for s in (61, 62, 63)]
    assert "zero_reward_spread" not in diagnose(rows).categories
