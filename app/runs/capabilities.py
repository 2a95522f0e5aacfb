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

from app.core.config import get_settings
from app.runs.launcher import sender
from grpodeck.contract.spec import RunSpec
from grpodeck.contract.tasks import WORKER_CAPABILITIES, WorkerCapabilities

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
                found[str(host)[:200]] = WorkerCapabilities(
                    cuda=answer["cuda"], vllm=answer["vllm"],
                    device=str(answer.get("device", ""))[:200])
    return found


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
