"""System metrics of the training process, sampled on a thread of their own: CPU %, resident
memory, GPU memory (torch's caching allocator) and utilisation (NVML), and tokens/s.

Why here, in the client: a launched run (the worker's ``MetricsReporter``) and an outside run
(``grpodeck.client.init``, ``DeckCallback``) report through the same ``Sender``, and both start
a ``SystemSampler`` where they start reporting, so it samples only the process that reports
(rank 0 in a multi-process run) and nothing on the training thread waits for it.

Rows carry the latest step the trainer logged (``note``) and their time: the Deck keeps one
value per (step, name), the last of a long step's samples, and each sample at its own time
besides, so the samples of an evaluation (one step) are each drawn. Names are under ``system/``:
``system/time`` (the sample's Unix time: system charts are drawn against it),
``system/cpu_percent`` (this process, 100 = one core busy), ``system/rss_bytes``,
``system/gpu{i}/mem_allocated_bytes``, ``.../mem_reserved_bytes``, ``.../mem_total_bytes``,
``.../util_percent`` (NVML, when ``pynvml`` is installed: ``pip install 'grpodeck-client[gpu]'``)
and ``system/tokens_per_s`` (from the ``num_tokens`` TRL logs, between two logs).

GPU figures come only from a process whose torch has already initialised CUDA: the sampler never
imports torch nor creates a CUDA context of its own (that would take memory on every visible
device, and break a training script that forks later). ``GRPODECK_SYSTEM_SECONDS`` sets the
interval (``0``: no sampling); a sampler never raises into training, it warns once.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("grpodeck.client")

PREFIX = "system/"
DEFAULT_SECONDS = 10.0  # often enough to see a memory climb, rare enough to cost nothing
ENV_SECONDS = "GRPODECK_SYSTEM_SECONDS"
TOKENS = "num_tokens"  # TRL's running count of tokens seen (prompts and completions)
Rows = list[dict[str, Any]]


def seconds_setting(seconds: float | None = None) -> float:
    """The sampling interval: ``seconds``, else ``$GRPODECK_SYSTEM_SECONDS``, else 10 s;
    0 (or less) means off. A variable that is not a number is warned about and ignored:
    reporting never stops training over a setting."""
    if seconds is not None:
        return float(seconds)
    raw = os.environ.get(ENV_SECONDS, "").strip()
    if not raw:
        return DEFAULT_SECONDS
    try:
        return float(raw)
    except ValueError:
        log.warning("grpodeck: %s=%r is not a number of seconds; sampling every %g s",
                    ENV_SECONDS, raw[:40], DEFAULT_SECONDS)
        return DEFAULT_SECONDS


def process_metrics(process: Any) -> dict[str, float]:
    """CPU % of ``process`` (a ``psutil.Process``) since the previous call, and its RSS."""
    return {f"{PREFIX}cpu_percent": float(process.cpu_percent(None)),
            f"{PREFIX}rss_bytes": float(process.memory_info().rss)}


def loaded_cuda() -> Any | None:
    """``torch.cuda`` when this process imported torch and initialised CUDA, else None."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        return cuda if cuda is not None and cuda.is_initialized() else None
    except Exception:  # noqa: BLE001 - a torch without CUDA support, torn down at exit
        return None


def cuda_metrics(cuda: Any, utilisation: Callable[[int], float | None]) -> dict[str, float]:
    """Memory per device from torch's allocator (``cuda``: ``torch.cuda`` or anything with its
    ``device_count``/``memory_allocated``/``memory_reserved``/``get_device_properties``), and
    ``utilisation(index)`` where it knows one."""
    out: dict[str, float] = {}
    for index in range(int(cuda.device_count())):
        name = f"{PREFIX}gpu{index}/"
        out[name + "mem_allocated_bytes"] = float(cuda.memory_allocated(index))
        out[name + "mem_reserved_bytes"] = float(cuda.memory_reserved(index))
        out[name + "mem_total_bytes"] = float(cuda.get_device_properties(index).total_memory)
        busy = utilisation(index)
        if busy is not None:
            out[name + "util_percent"] = float(busy)
    return out


class Nvml:
    """GPU utilisation through NVML (``pynvml``, from nvidia-ml-py), when it is installed and a
    driver answers; otherwise None, decided once. Torch's device ``index`` is mapped through
    ``CUDA_VISIBLE_DEVICES`` (numbers or ``GPU-`` UUIDs) to the device NVML means."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._usable: bool | None = None

    def _module(self) -> Any | None:
        if self._usable is None:
            try:
                import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]

                pynvml.nvmlInit()
                self._nvml, self._usable = pynvml, True
            except Exception as exc:  # noqa: BLE001 - not installed, no driver, no device
                log.debug("grpodeck: no GPU utilisation (NVML: %s)", exc)
                self._usable = False
        return self._nvml if self._usable else None

    def __call__(self, index: int) -> float | None:
        nvml = self._module()
        if nvml is None:
            return None
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
                   if v.strip()]
        try:
            if not visible:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            elif index >= len(visible):
                return None
            elif visible[index].isdigit():
                handle = nvml.nvmlDeviceGetHandleByIndex(int(visible[index]))
            elif visible[index].startswith("GPU-"):
                handle = nvml.nvmlDeviceGetHandleByUUID(visible[index])
            else:  # a MIG slice: NVML reports no utilisation for those
                return None
            return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except Exception:  # noqa: BLE001 - any NVML error: this figure is left out
            return None


class Throughput:
    """Tokens per second between two logs that carry TRL's running ``num_tokens``. The first log
    has no earlier one to compare with; a count that went back (a resumed run) starts over."""

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None  # (monotonic time, num_tokens)

    def note(self, metrics: Mapping[str, Any], now: float) -> float | None:
        raw = metrics.get(TOKENS)
        try:
            tokens = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        last, self._last = self._last, (now, tokens)
        if last is None or tokens <= last[1] or now <= last[0]:
            return None
        return (tokens - last[1]) / (now - last[0])


class SystemSampler(threading.Thread):
    """Every ``seconds``, one row of system metrics at the latest noted step into ``sink`` (a
    ``Sender.put_rows``); one more at ``close``, so even a run shorter than the interval has
    one. ``cuda``: where GPU memory is read (default: ``loaded_cuda()`` at each sample)."""

    def __init__(self, sink: Callable[[Rows], None], seconds: float = DEFAULT_SECONDS, *,
                 cuda: Callable[[], Any | None] = loaded_cuda,
                 utilisation: Callable[[int], float | None] | None = None) -> None:
        super().__init__(name="grpodeck-system", daemon=True)
        if not seconds > 0:
            raise ValueError(f"system metrics: seconds must be above 0, not {seconds!r}")
        self.sink, self.seconds, self._cuda = sink, float(seconds), cuda
        self._utilisation = utilisation or Nvml()
        self.step = 0
        self._throughput = Throughput()
        self._halt = threading.Event()
        self._sampling = threading.Lock()  # one sample at a time (the thread's, close's)
        self._warned = False
        try:
            import psutil

            self._process: Any = psutil.Process()
            self._process.cpu_percent(None)  # the first call only starts the measurement
        except Exception as exc:  # noqa: BLE001 - psutil missing or refused: GPU may still come
            log.warning("grpodeck: no CPU/RSS system metrics (%s)", exc)
            self._process = None

    def note(self, step: int, metrics: Mapping[str, Any]) -> dict[str, float]:
        """On the training thread, for each log: remember its step; the metrics to add to that
        log's row (``system/tokens_per_s`` when it carries ``num_tokens``)."""
        self.step = max(0, int(step))
        rate = self._throughput.note(metrics, time.monotonic())
        return {} if rate is None else {f"{PREFIX}tokens_per_s": rate}

    def sample(self) -> dict[str, float]:
        """This moment's figures (CPU % since the previous sample), stamped with the time
        (``system/time``, Unix seconds: the Deck draws system charts against the clock)."""
        out: dict[str, float] = {}
        if self._process is not None:
            out.update(process_metrics(self._process))
        cuda = self._cuda()
        if cuda is not None:
            out.update(cuda_metrics(cuda, self._utilisation))
        if out:
            out[f"{PREFIX}time"] = time.time()
        return out

    def emit(self) -> None:
        """One sample into the sink; a failure is a warning (once), never an exception."""
        try:
            with self._sampling:
                metrics = self.sample()
                if metrics:
                    self.sink([{"step": self.step, "metrics": metrics}])
        except Exception as exc:  # noqa: BLE001 - whatever broke, training must go on
            if not self._warned:
                self._warned = True
                log.warning("grpodeck: system metrics failed (%r); training goes on", exc)

    def run(self) -> None:
        while not self._halt.wait(self.seconds):
            self.emit()

    def close(self) -> None:
        """Stop sampling, after a last sample (the sink must still take rows)."""
        if self._halt.is_set():
            return
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5.0)
        self.emit()


def start_sampler(sink: Callable[[Rows], None], enabled: bool = True,
                  seconds: float | None = None) -> SystemSampler | None:
    """A started sampler, or None when ``enabled`` is False or the interval setting is 0."""
    every = seconds_setting(seconds)
    if not enabled or every <= 0:
        return None
    sampler = SystemSampler(sink, every)
    sampler.start()
    return sampler
