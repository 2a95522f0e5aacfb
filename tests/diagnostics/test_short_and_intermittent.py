"""Collapses a smoke test already shows, and zero spread that comes and goes (issue 31): a
short run with an unmistakable collapse is at least a warning within its steps; most steps
without any spread is zero spread even when short excursions break every window; only an
exact zero counts as zero. Healthy short runs stay healthy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.diagnostics import diagnose
from app.diagnostics.model import Finding, severity_rank
from app.imports.service import diagnose_path
from tests.diagnostics.conftest import healthy_rows


def _at_least_warning(findings: list[Finding], category: str) -> Finding:
    hits = [f for f in findings if f.category == category
            and severity_rank(f.severity) >= severity_rank("warning")]
    assert hits, [(f.category, f.severity) for f in findings]
    return hits[0]


def _verl_console(path: Path, steps: int) -> Path:
    """verl's console lines for a run whose entropy falls 0.65 -> 0.005 and whose task score
    is 0 from step 5 on (every completion scored 0)."""
    lines = []
    for step in range(1, steps + 1):
        entropy = 0.65 * (0.005 / 0.65) ** ((step - 1) / (steps - 1))
        score = 0.25 - 0.05 * step if step < 5 else 0.0
        metrics = {"critic/score/mean": score, "actor/entropy": entropy,
                   "actor/pg_loss": 0.0, "actor/grad_norm": 0.3, "response_length/mean": 300.0}
        body = " - ".join(f"{k}:np.float64({v!r})" for k, v in metrics.items())
        lines.append(f"(TaskRunner pid=7) step:{step} - {body}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_18_step_verl_log_with_a_collapse_is_flagged_within_its_steps(tmp_path: Path) -> None:
    d = diagnose_path(_verl_console(tmp_path / "smoke.console.log", 18))
    entropy = _at_least_warning(d.findings, "entropy_collapse")
    assert entropy.last_step == 18 and entropy.first_step <= 10
    pinned = _at_least_warning(d.findings, "zero_reward_spread")
    assert (pinned.metric, pinned.first_step, pinned.last_step) == ("reward", 5, 18)
    assert pinned.evidence["kind"] == "too_hard" and "exactly 0" in pinned.summary
    assert pinned.actions and entropy.actions and d.verdict == "critical"


def test_a_15_step_run_whose_entropy_falls_to_a_tenth_with_a_flat_reward() -> None:
    noise = np.random.default_rng(31)
    steps = np.arange(1, 16)
    entropy = np.where(steps <= 3, 0.8, np.maximum(0.08, 0.8 * 0.72 ** (steps - 3)))
    rows = [(int(s), {"reward": 0.5 + noise.normal(0, 0.01), "reward_std": 0.3,
                      "entropy": float(e)}) for s, e in zip(steps, entropy)]
    f = _at_least_warning(diagnose(rows).findings, "entropy_collapse")
    assert f.evidence["ratio_to_early"] <= 0.1 and 4 <= f.first_step <= 6 and f.last_step == 15


def test_a_short_run_whose_entropy_falls_to_a_third_is_not_judged_yet() -> None:
    """In 15 steps only the unmistakable is judged: a fall to a third (it stays below half)
    is left to the windowed judgement once the run is longer."""
    steps = np.arange(1, 16)
    rows = [(int(s), {"reward": 0.5, "reward_std": 0.3, "entropy": 0.8 - 0.55 * (s - 1) / 14})
            for s in steps]
    assert diagnose(rows).verdict == "healthy"


@pytest.mark.parametrize("n", range(5, 21))
@pytest.mark.parametrize("seed", range(3))
def test_healthy_short_runs_stay_healthy(n: int, seed: int) -> None:
    d = diagnose(healthy_rows(300, 1, seed)[:n])
    assert d.verdict == "healthy", [(f.category, f.severity) for f in d.findings]


def _intermittent(n: int, spread: float = 0.2) -> list[tuple[int, dict]]:
    """reward_std exactly 0 and a constant reward on most steps, three-step excursions with
    spread every nine steps (each long enough to survive a rolling median)."""
    excursion = {s for s in range(1, n + 1) if s % 9 in (4, 5, 6)}
    return [(s, {"reward": 0.875 if s in excursion else 1.0,
                 "reward_std": spread if s in excursion else 0.0,
                 "grad_norm": 0.5 if s in excursion else 1e-3, "loss": 0.0})
            for s in range(1, n + 1)]


def test_intermittent_exact_zero_spread_is_a_warning() -> None:
    d = diagnose(_intermittent(40))
    f = _at_least_warning(d.findings, "zero_reward_spread")
    assert f.metric == "reward_std" and f.evidence["exact_signal"]
    assert f.evidence["zero_spread_step_share"] == pytest.approx(27 / 40, abs=0.01)
    assert f.evidence["steps_with_spread"] == 13 and f.evidence["kind"] == "too_easy"
    assert d.verdict == "warning"


def test_intermittent_frac_reward_zero_std_at_95_percent_counts_as_no_spread() -> None:
    """frac_reward_zero_std >= 0.95 on a step is "no group had spread" for the share rule."""
    rows = [(s, {**m, "frac_reward_zero_std": 0.96 if m["reward_std"] == 0 else 0.25})
            for s, m in _intermittent(40)]
    rows = [(s, {k: v for k, v in m.items() if k != "reward_std"}) for s, m in rows]
    f = _at_least_warning(diagnose(rows).findings, "zero_reward_spread")
    assert f.metric == "frac_reward_zero_std"


@pytest.mark.parametrize("tiny", [0.004, 1e-6])
def test_only_an_exact_zero_reward_std_is_zero_spread(tiny: float) -> None:
    """A tolerance (reward_std < 0.01 treated as 0) would call a small real spread none."""
    rows = [(s, {"reward": 1.0, "reward_std": tiny, "loss": 0.0}) for s in range(1, 101)]
    assert "zero_reward_spread" not in diagnose(rows).categories  # windowed rule
    assert "zero_reward_spread" not in diagnose(rows[:12]).categories  # short: the share rule


def test_a_tiny_reward_std_between_exact_zeros_is_an_excursion_not_a_zero() -> None:
    rows = [(s, {"reward": 1.0, "reward_std": 0.0 if s % 2 else 1e-6, "loss": 0.0})
            for s in range(1, 42)]  # about half the steps: not "most"
    assert "zero_reward_spread" not in diagnose(rows).categories


def test_a_reward_that_goes_negative_is_not_pinned_at_zero() -> None:
    """A mean of exactly 0 over rewards that can be negative (+1/-1 balanced) says nothing
    about spread; only a never-negative reward at 0 means every completion scored 0."""
    rows = [(s, {"reward": 0.0 if s % 4 else -0.5, "entropy": 0.7}) for s in range(1, 41)]
    assert "zero_reward_spread" not in diagnose(rows).categories
