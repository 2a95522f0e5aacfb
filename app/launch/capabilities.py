"""Which workers could generate with vLLM: asked by a broadcast, remembered for a minute.

The web app never imports the worker: it broadcasts the contract's ``WORKER_CAPABILITIES``
remote-control command and each worker answers for itself (``worker.capabilities``). Remote
control needs a broker with fanout exchanges: kombu's SQLite transport (the embedded default) has
none, so there no worker can report and ``use_vllm`` is not offered.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kombu import Connection

from app.core.broker import sender
from app.core.config import get_settings
from grpodeck.contract.spec import RunSpec
from grpodeck.contract.tasks import WORKER_CAPABILITIES, Device, WorkerCapabilities

log = logging.getLogger(__name__)

REPLY_SECONDS = 0.5  # a broadcast waits this long for every worker's reply
FRESH_SECONDS = 60.0  # a report is trusted this long
RETRY_SECONDS = 10.0  # no report: ask again soon (a worker that just started answers shortly)


@dataclass(frozen=True)
class Reports:
    """The workers that answered, by Celery hostname; ``broadcast``: the broker carries them."""

    workers: dict[str, WorkerCapabilities] = field(default_factory=dict)
    broadcast: bool = True

    @property
    def vllm_ready(self) -> bool:
        return any(w["cuda"] and w["vllm"] for w in self.workers.values())

    @property
    def note(self) -> str:
        """One line: why use_vllm is not offered (empty when it is)."""
        if self.vllm_ready:
            return ""
        if any(w["cuda"] for w in self.workers.values()):
            return "the workers with a GPU that reported have no vllm package"
        if not self.broadcast:
            return ("no worker with a GPU has reported (the embedded SQLite broker carries no "
                    "worker reports: use Redis)")
        return "no worker with a GPU has reported"


def parse(replies: list[dict[str, Any]] | None) -> dict[str, WorkerCapabilities]:
    """A broadcast's replies ([{hostname: answer}]) -> the well-formed answers. A worker of an
    older version answers ``{"error": ...}`` (no such command): it is left out."""
    found: dict[str, WorkerCapabilities] = {}
    for reply in replies or []:
        for host, answer in reply.items():
            if (isinstance(answer, dict) and isinstance(answer.get("cuda"), bool)
                    and isinstance(answer.get("vllm"), bool)):
                worker = WorkerCapabilities(cuda=answer["cuda"], vllm=answer["vllm"],
                                            device=str(answer.get("device", ""))[:200])
                count = answer.get("cpu_count")
                if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                    # a worker of this version: its devices (an older one does not say)
                    worker.update(devices=_devices(answer.get("devices")), cpu_count=count,
                                  deepspeed=answer.get("deepspeed") is True)
                found[str(host)[:200]] = worker
    return found


def _devices(value: object) -> list[Device]:
    """The well-formed GPU entries of a report (an older worker sends none)."""
    found: list[Device] = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("index"), int):
            memory = entry.get("memory_bytes")
            found.append(Device(index=entry["index"], name=str(entry.get("name", ""))[:100],
                                memory_bytes=memory if isinstance(memory, int) else 0))
    return found[:256]


_lock = threading.Lock()
_cache: dict[str, tuple[float, Reports]] = {}


def _ask(broker_url: str, queue: str) -> Reports:
    if not Connection(broker_url).supports_exchange_type("fanout"):
        return Reports(broadcast=False)
    try:
        replies = sender(broker_url, queue).control.broadcast(
            WORKER_CAPABILITIES, reply=True, timeout=REPLY_SECONDS)
    except Exception as exc:  # noqa: BLE001 - a broker outage must not break the form
        log.warning("capability broadcast failed: %s", exc)
        return Reports()
    return Reports(parse(replies))


def worker_reports() -> Reports:
    """The workers' reports on this deployment's broker, asked at most once a minute."""
    settings = get_settings()
    now = time.monotonic()
    with _lock:  # one broadcast at a time; the others wait and read its answer
        cached = _cache.get(settings.broker_url)
        if cached is not None and cached[0] > now:
            return cached[1]
        reports = _ask(settings.broker_url, settings.queue)
        ttl = FRESH_SECONDS if reports.workers else RETRY_SECONDS
        _cache[settings.broker_url] = (time.monotonic() + ttl, reports)
        return reports


def remember(broker_url: str, replies: list[dict[str, Any]]) -> Reports:
    """Keep broadcast replies as this broker's fresh report (what ``worker_reports`` does with
    the replies it gets)."""
    reports = Reports(parse(replies), Connection(broker_url).supports_exchange_type("fanout"))
    with _lock:
        _cache[broker_url] = (time.monotonic() + FRESH_SECONDS, reports)
    return reports


def forget() -> None:
    """Drop every remembered report: the next question asks the workers again."""
    with _lock:
        _cache.clear()


def vllm_problem(spec: RunSpec) -> str | None:
    """Why a spec asking for vLLM cannot be launched here, or None."""
    if not spec.use_vllm:
        return None
    reports = worker_reports()
    if reports.vllm_ready:
        return None
    return (f"use_vllm needs a worker with a CUDA GPU and vllm, and {reports.note}: launch "
            "without use_vllm to generate with transformers")


def gpu_count(worker: WorkerCapabilities) -> int:
    """The GPUs a worker reported (a CUDA worker of an older version: one)."""
    if not worker["cuda"]:
        return 0
    return len(worker.get("devices") or []) or 1


def _worker_problems(spec: RunSpec, worker: WorkerCapabilities) -> dict[str, str]:
    """Why this one worker cannot train ``spec`` on its devices, by field (a worker that
    reported its devices: ``cpu_count`` is there)."""
    problems: dict[str, str] = {}
    if worker["cuda"]:
        if spec.num_processes > gpu_count(worker):
            problems["num_processes"] = f"{gpu_count(worker)} GPU(s)"
        if spec.distributed.startswith("deepspeed") and not worker.get("deepspeed"):
            problems["distributed"] = "a GPU worker without the deepspeed package"
    else:
        if spec.num_processes > worker.get("cpu_count", 1):
            problems["num_processes"] = f"{worker.get('cpu_count', 1)} CPU cores"
        if spec.distributed != "ddp":
            problems["distributed"] = "a CPU worker (ddp over gloo only)"
        if spec.mixed_precision == "fp16":
            problems["mixed_precision"] = "a CPU worker (no fp16)"
    return problems


DEVICE_FIELDS = ("num_processes", "distributed", "mixed_precision")


def device_problems(spec: RunSpec) -> dict[str, str]:
    """Why no reported worker can train ``spec`` on the devices it asks for, by field (empty:
    it can). A single-process run asks nothing of the devices and is never refused here. With
    no report (the embedded SQLite broker carries none), ddp on several processes is left to
    the worker, which refuses what it cannot do when the run starts; sharding (DeepSpeed,
    FSDP) and fp16 need a GPU worker that has said so."""
    if spec.num_processes == 1 and spec.distributed == "ddp" and spec.mixed_precision != "fp16":
        return {}
    reports = worker_reports()
    # Only workers that said what devices they have (an older worker's report does not).
    workers = {host: w for host, w in reports.workers.items() if "cpu_count" in w}
    if not workers:
        why = ("no worker has reported its devices" + (
            "" if reports.broadcast else " (the embedded SQLite broker carries no worker "
            "reports: use Redis)"))
        problems: dict[str, str] = {}
        if spec.distributed != "ddp":
            problems["distributed"] = f"{spec.distributed} needs a GPU worker, and {why}"
        if spec.mixed_precision == "fp16":
            problems["mixed_precision"] = f"fp16 needs a GPU worker, and {why}"
        return problems
    found = {host: _worker_problems(spec, w) for host, w in workers.items()}
    if any(not problems for problems in found.values()):
        return {}
    messages: dict[str, str] = {}
    for name in DEVICE_FIELDS:
        having = sorted({problems[name] for problems in found.values() if name in problems})
        if having:
            value = getattr(spec, name)
            messages[name] = (
                f"num_processes={value} is more devices than any worker reported (they have: "
                f"{', '.join(having)})" if name == "num_processes" else
                f"{name}={value} cannot run on the workers that reported: {', '.join(having)}")
    if not messages:  # each field suits some worker, but no worker suits them all
        messages["num_processes"] = ("no single worker that reported has these devices, "
                                     "this sharding and this precision together")
    return messages


def refuse_devices(spec: RunSpec, prefix: tuple[str, ...] = ("body",)) -> None:
    """Raise a 422 naming each device field no reported worker can satisfy (the API's answer)."""
    from fastapi.exceptions import RequestValidationError

    problems = device_problems(spec)
    if problems:
        raise RequestValidationError([
            {"type": "value_error", "loc": (*prefix, field), "msg": message,
             "input": getattr(spec, field)} for field, message in problems.items()])
