"""The oom_risk check on synthetic system metrics: GPU memory reserved above 95% of the device
for several samples in a row fires (with the steps and shares as evidence); one brief peak does
not; a run without GPU metrics is "could not check", never at risk; and it is told apart per
device."""

from __future__ import annotations

from app.diagnostics import diagnose
from app.diagnostics.detectors import memory
from app.diagnostics.state import DiagnosticsState

TOTAL = 80e9
RESERVED = "system/gpu0/mem_reserved_bytes"


def gpu_rows(shares: list[float], gpu: int = 0, start: int = 1) -> list[tuple[int, dict]]:
    """A sample per step: reward plus GPU ``gpu``'s reserved share of 80 GB."""
    return [(start + i, {"reward": 0.5, "system/cpu_percent": 100.0,
                         f"system/gpu{gpu}/mem_reserved_bytes": share * TOTAL,
                         f"system/gpu{gpu}/mem_allocated_bytes": share * TOTAL * 0.8,
                         f"system/gpu{gpu}/mem_total_bytes": TOTAL})
            for i, share in enumerate(shares)]


def oom(rows: list[tuple[int, dict]]) -> list:
    return [f for f in diagnose(rows).findings if f.category == "oom_risk"]


def test_reserved_memory_that_stays_above_95_percent_is_an_oom_risk() -> None:
    shares = [0.6] * 5 + [0.96, 0.97, 0.98, 0.97] + [0.7] * 3
    found = oom(gpu_rows(shares))
    assert len(found) == 1
    f = found[0]
    assert (f.severity, f.first_step, f.last_step, f.metric) == ("warning", 6, 9, RESERVED)
    assert f.evidence["samples_above"] == 4 and f.evidence["gpu"] == "gpu0"
    assert f.evidence["steps"] == [6, 7, 8, 9]
    assert f.evidence["reserved_shares"] == [0.96, 0.97, 0.98, 0.97]
    assert f.evidence["reserved_share_peak"] == 0.98
    assert f.evidence["threshold_share"] == 0.95 and f.evidence["total_bytes"] == TOTAL
    assert any("per_device_train_batch_size" in a for a in f.actions)
    assert any("gradient_checkpointing" in a for a in f.actions)
    assert any("vllm_gpu_memory_utilization" in a for a in f.actions)
    assert "gpu0" in f.summary and "95%" in f.summary


def test_exactly_the_minimum_stretch_fires_and_one_less_does_not() -> None:
    need = memory.MIN_SAMPLES
    assert len(oom(gpu_rows([0.5] * 3 + [0.99] * need + [0.5] * 3))) == 1
    assert oom(gpu_rows([0.5] * 3 + [0.99] * (need - 1) + [0.5] * 3)) == []


def test_brief_peaks_are_not_an_oom_risk() -> None:
    # two-sample peaks, again and again: never sustained
    shares = [0.6, 0.99, 0.99, 0.6, 0.6, 0.99, 0.6, 0.99, 0.99, 0.6] * 3
    assert oom(gpu_rows(shares)) == []
    assert oom(gpu_rows([0.95] * 10)) == []  # at the line, not above it


def test_a_run_without_gpu_metrics_claims_nothing_and_says_it_could_not_check() -> None:
    rows = [(s, {"reward": 0.5, "system/cpu_percent": 100.0, "system/rss_bytes": 2e9})
            for s in range(1, 30)]
    diagnosis = diagnose(rows)
    assert not [f for f in diagnosis.findings if f.category == "oom_risk"]
    assert diagnosis.unchecked["oom_risk"] == memory.RESERVED
    checked = diagnose(gpu_rows([0.5] * 5))
    assert "oom_risk" not in checked.unchecked and RESERVED in checked.metrics


def test_reserved_memory_without_the_device_total_claims_nothing() -> None:
    rows = [(s, {"reward": 0.5, RESERVED: 79e9}) for s in range(1, 20)]
    assert oom(rows) == []


def test_each_device_is_judged_on_its_own_total() -> None:
    rows = [(s, {**a, **b}) for (s, a), (_, b) in zip(gpu_rows([0.5] * 6, gpu=0),
                                                       gpu_rows([0.99] * 6, gpu=1), strict=True)]
    found = oom(rows)
    assert [f.metric for f in found] == ["system/gpu1/mem_reserved_bytes"]


def test_a_live_run_fed_batch_by_batch_fires_once_the_stretch_is_long_enough() -> None:
    state = DiagnosticsState.new()
    rows = gpu_rows([0.5, 0.5, 0.99, 0.99, 0.99, 0.99])
    assert not [f for f in state.update(rows[:4]).findings if f.category == "oom_risk"]
    found = [f for f in state.update(rows[4:5]).findings if f.category == "oom_risk"]
    assert [(f.first_step, f.last_step) for f in found] == [(3, 5)]
