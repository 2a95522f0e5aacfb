"""The client's system-metrics sampler (grpodeck.client.system) on this machine: real psutil
figures of this process, the rows it hands the sender and at which step, tokens/s from TRL's
``num_tokens``, the switches, and a sampler that fails without touching training.

This machine has no GPU (CPU torch): the CUDA path reads a small stand-in with torch.cuda's
five calls (``FakeCuda``), the only way to run it here; NVML is the real pynvml (nvidia-ml-py,
the ``gpu`` extra), which finds no driver here, so utilisation is left out."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import psutil
import pytest

from grpodeck.client import system
from grpodeck.client.system import Nvml, SystemSampler, Throughput, start_sampler

GiB = 2**30


@dataclass
class Properties:
    total_memory: int


class FakeCuda:
    """torch.cuda's surface the sampler reads, for two devices of 80 GiB."""

    def __init__(self, reserved: list[int]) -> None:
        self.reserved = reserved

    def device_count(self) -> int:
        return len(self.reserved)

    def memory_allocated(self, index: int) -> int:
        return self.reserved[index] // 2

    def memory_reserved(self, index: int) -> int:
        return self.reserved[index]

    def get_device_properties(self, index: int) -> Properties:
        return Properties(80 * GiB)


def collect() -> tuple[list[dict[str, Any]], Any]:
    rows: list[dict[str, Any]] = []
    return rows, rows.extend


def test_a_sample_holds_this_process_cpu_and_rss_as_psutil_sees_them() -> None:
    started = time.monotonic()
    sampler = SystemSampler(lambda rows: None, 60)
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # keep one core busy between the two readings
        sum(range(10_000))
    before = time.time()
    sample = sampler.sample()
    elapsed = time.monotonic() - started
    assert set(sample) == {"system/cpu_percent", "system/rss_bytes", "system/time"}  # no CUDA
    assert before <= sample["system/time"] <= time.time()  # stamped: charts read by the clock
    # 100 = one core. The loop used 0.3 s of CPU inside psutil's window, which lies within
    # `elapsed`: at least that share, whatever else the machine was doing (a fixed floor such as
    # "> 20" failed in CI when four xdist workers shared two cores: 18.9). 10 ms clock ticks.
    assert sample["system/cpu_percent"] >= 100 * 0.29 / elapsed
    rss = psutil.Process(os.getpid()).memory_info().rss
    assert abs(sample["system/rss_bytes"] - rss) < 0.2 * rss


def test_samples_carry_the_latest_logged_step_and_close_sends_a_last_one() -> None:
    rows, sink = collect()
    sampler = SystemSampler(sink, 0.05)
    sampler.start()
    assert sampler.note(7, {"loss": 1.0}) == {}
    time.sleep(0.3)
    sampler.note(9, {"loss": 0.5})
    sampler.close()
    assert len(rows) >= 2 and all(set(r["metrics"]) == {
        "system/cpu_percent", "system/rss_bytes", "system/time"} for r in rows)
    assert {r["step"] for r in rows} <= {7, 9} and rows[-1]["step"] == 9
    assert not sampler.is_alive()
    count = len(rows)
    sampler.close()  # twice is harmless: no second last sample
    assert len(rows) == count


def test_a_run_shorter_than_the_interval_still_gets_one_sample() -> None:
    rows, sink = collect()
    sampler = start_sampler(sink, seconds=3600)
    assert sampler is not None
    sampler.note(3, {})
    sampler.close()
    assert [r["step"] for r in rows] == [3]


def test_tokens_per_second_come_from_num_tokens_between_two_logs() -> None:
    rate = Throughput()
    assert rate.note({"num_tokens": 1_000.0}, now=10.0) is None  # nothing to compare with yet
    assert rate.note({"loss": 1.0}, now=11.0) is None  # a log without the count
    assert rate.note({"num_tokens": 5_000.0}, now=12.0) == pytest.approx(2_000.0)
    assert rate.note({"num_tokens": 100.0}, now=13.0) is None  # went back: a resumed run
    assert rate.note({"num_tokens": 400.0}, now=13.5) == pytest.approx(600.0)


def test_note_returns_tokens_per_second_for_the_log_row() -> None:
    sampler = SystemSampler(lambda rows: None, 60)
    assert sampler.note(1, {"num_tokens": 100}) == {}
    time.sleep(0.05)
    extra = sampler.note(2, {"num_tokens": 1_100})
    assert set(extra) == {"system/tokens_per_s"} and 0 < extra["system/tokens_per_s"] < 20_000


def test_the_switches_turn_sampling_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert start_sampler(lambda rows: None, enabled=False) is None
    assert start_sampler(lambda rows: None, seconds=0) is None
    monkeypatch.setenv(system.ENV_SECONDS, "0")
    assert start_sampler(lambda rows: None) is None
    monkeypatch.setenv(system.ENV_SECONDS, "2.5")
    assert system.seconds_setting() == 2.5
    assert system.seconds_setting(1.0) == 1.0  # the argument wins over the variable
    monkeypatch.setenv(system.ENV_SECONDS, "often")
    assert system.seconds_setting() == system.DEFAULT_SECONDS  # warned, not raised
    monkeypatch.delenv(system.ENV_SECONDS)
    assert system.seconds_setting() == system.DEFAULT_SECONDS
    with pytest.raises(ValueError, match="above 0"):
        SystemSampler(lambda rows: None, 0)


def test_gpu_memory_per_device_from_torch_cuda() -> None:
    cuda = FakeCuda([79 * GiB, 10 * GiB])
    sampler = SystemSampler(lambda rows: None, 60, cuda=lambda: cuda,
                            utilisation=lambda index: 50.0 + index)
    sample = sampler.sample()
    assert sample["system/gpu0/mem_reserved_bytes"] == 79 * GiB
    assert sample["system/gpu0/mem_allocated_bytes"] == 79 * GiB // 2
    assert sample["system/gpu1/mem_reserved_bytes"] == 10 * GiB
    assert sample["system/gpu1/mem_total_bytes"] == 80 * GiB
    assert (sample["system/gpu0/util_percent"], sample["system/gpu1/util_percent"]) == (50, 51)


def test_without_an_nvml_driver_memory_is_reported_and_utilisation_left_out() -> None:
    cuda = FakeCuda([GiB])
    nvml = Nvml()  # the real pynvml: installed here, but no NVIDIA driver answers
    sampler = SystemSampler(lambda rows: None, 60, cuda=lambda: cuda, utilisation=nvml)
    sample = sampler.sample()
    assert sample["system/gpu0/mem_reserved_bytes"] == GiB
    assert "system/gpu0/util_percent" not in sample
    assert nvml(0) is None


def test_this_process_without_cuda_reports_no_gpu_figures() -> None:
    import torch  # CPU torch: imported, CUDA never initialised

    assert not torch.cuda.is_initialized()
    assert system.loaded_cuda() is None
    assert not [k for k in SystemSampler(lambda rows: None, 60).sample() if "gpu" in k]


def test_a_failing_sample_is_one_warning_and_training_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> Any:
        raise RuntimeError("driver went away")

    rows, sink = collect()
    sampler = SystemSampler(sink, 60, cuda=broken)
    with caplog.at_level(logging.WARNING, logger="grpodeck.client"):
        sampler.emit()
        sampler.emit()
    assert rows == []
    assert [r.getMessage() for r in caplog.records].count(
        "grpodeck: system metrics failed (RuntimeError('driver went away')); "
        "training goes on") == 1
