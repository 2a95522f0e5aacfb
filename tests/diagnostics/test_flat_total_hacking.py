"""Component hacking behind a flat total (issue 31): one reward component climbs to its ceiling
while another falls steadily, and the weighted total shows no trend. Each component is
measured on its own range whatever its name, and the finding explains the flat total, so the
run is not called "stalled"."""

from __future__ import annotations

import numpy as np
import pytest

from app.diagnostics import diagnose
from app.diagnostics.model import Finding
from tests.diagnostics.failure_runs import RUNS

STEPS = np.arange(1, 301)
T = STEPS / STEPS[-1]


def _rows(rise: str, fall: str, seed: int = 0, dip_back: bool = False) -> list[tuple[int, dict]]:
    """``rise`` climbs 0 -> 0.5 (its ceiling) by 60% of the run; ``fall`` loses the same 0.5
    from 0.8 (or dips and comes back); a large, noisy third component (a length penalty in
    other units) dominates the total's spread, and the total has no trend."""
    noise = np.random.default_rng(seed)
    ramp = np.minimum(1, T / 0.6)
    up = 0.5 * ramp + noise.normal(0, 0.05, len(T))
    shape = np.sin(np.pi * T) if dip_back else ramp
    down = 0.8 - 0.5 * shape + noise.normal(0, 0.05, len(T))
    length = noise.normal(0, 10, len(T))
    total = up + down + length
    return [(int(s), {"reward": float(total[i]), f"rewards/{rise}/mean": float(up[i]),
                      f"rewards/{fall}/mean": float(down[i]),
                      "rewards/length_penalty/mean": float(length[i]), "reward_std": 0.3})
            for i, s in enumerate(STEPS)]


def _hacking(rows: list[tuple[int, dict]]) -> tuple[Finding, list[str]]:
    d = diagnose(rows)
    (f,) = [f for f in d.findings if f.category == "reward_hacking"]
    return f, [g.category for g in d.findings if g.severity != "info"]


@pytest.mark.parametrize("rise,fall", [("format", "accuracy"), ("b", "a"),
                                       ("zz_style", "aa_quality")])
@pytest.mark.parametrize("seed", range(3))
def test_a_ceiling_against_a_steady_fall_is_hacking_not_a_stall(rise: str, fall: str,
                                                                 seed: int) -> None:
    f, shown = _hacking(_rows(rise, fall, seed))
    assert f.severity == "warning" and f.metric == f"rewards/{fall}/mean"
    assert rise in f.evidence["rising"] and fall in f.evidence["falling"]
    assert f.evidence["explains_flat_total"] is True and "not merely stalled" in f.summary
    assert "stalled" not in shown
    assert f.first_step <= 0.6 * STEPS[-1] and f.actions


def test_a_component_that_dips_and_comes_back_is_not_a_steady_fall() -> None:
    d = diagnose(_rows("format", "judge", dip_back=True))
    assert not [f for f in d.findings if f.category == "reward_hacking" and f.severity != "info"]


def test_hacking_found_by_the_total_yardstick_also_explains_a_flat_total() -> None:
    """Style rises exactly as much as correctness falls: the stall is the hacking."""
    run = RUNS["hack_total_flat"]()
    d = diagnose(run.rows, run.context)
    assert d.categories == ["reward_hacking"]
    assert d.findings[0].evidence["explains_flat_total"] is True


@pytest.mark.parametrize("name", ["hack_total_rises", "hack_saturated_total_falls"])
def test_a_total_that_moves_is_not_called_flat(name: str) -> None:
    run = RUNS[name]()
    (f,) = [f for f in diagnose(run.rows, run.context).findings
            if f.category == "reward_hacking"]
    assert "explains_flat_total" not in f.evidence
