"""The worker's answer to the web app's capability broadcast (``WORKER_CAPABILITIES``).

The web app offers ``use_vllm`` only when a worker has said it has a CUDA GPU and vllm. The
answer is what a training child would find, so it is found the same way: by a fresh Python
process (``python -m worker.capabilities``) that imports torch, which the worker's main process
never loads. It is found once, in the background when the worker is ready, and kept: the
command itself only reads it (a remote-control command runs in the worker's consumer loop).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

from celery.signals import worker_ready
from celery.worker.control import inspect_command

from grpodeck.contract.tasks import WORKER_CAPABILITIES, WorkerCapabilities
from worker.slots import VISIBLE_ENV, slot_env, worker_slots

log = logging.getLogger(__name__)
PROBE_TIMEOUT = 300.0

_lock = threading.Lock()
_found: list[WorkerCapabilities] = []


def probe() -> WorkerCapabilities:
    """This process's device: a CUDA GPU, the vllm and deepspeed packages (importable, not
    imported), each visible GPU and the CPU cores (for runs on many devices)."""
    import importlib.util

    import torch

    from worker.training.hardware import describe, devices

    visible = os.environ.get(VISIBLE_ENV)
    return WorkerCapabilities(cuda=torch.cuda.is_available(),
                              vllm=importlib.util.find_spec("vllm") is not None,
                              device=describe() + ("" if visible is None
                                                   else f" [{VISIBLE_ENV}={visible}]"),
                              devices=devices(),
                              deepspeed=importlib.util.find_spec("deepspeed") is not None,
                              cpu_count=len(os.sched_getaffinity(0)) if hasattr(
                                  os, "sched_getaffinity") else (os.cpu_count() or 1))


def capabilities() -> WorkerCapabilities:
    """The probe's answer from a child process, found once per worker. With device slots the
    probe sees the first slot's devices, as a training child does: a worker of 2-GPU slots
    offers what one run gets (2 GPUs), not the whole box."""
    slots = worker_slots()
    env = {**os.environ, **slot_env(slots[0] if slots else None)}
    with _lock:
        if not _found:
            try:
                done = subprocess.run([sys.executable, "-m", "worker.capabilities"],
                                      capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                                      check=True, env=env)
                _found.append(WorkerCapabilities(**json.loads(done.stdout)))
            except (OSError, subprocess.SubprocessError, ValueError, TypeError) as exc:
                log.warning("capability probe failed (%s): reporting no GPU", exc)
                _found.append(WorkerCapabilities(cuda=False, vllm=False,
                                                 device=f"unknown (probe failed: {exc})"[:200],
                                                 devices=[], deepspeed=False, cpu_count=1))
        return _found[0]


@inspect_command(name=WORKER_CAPABILITIES)
def grpodeck_capabilities(state: object) -> WorkerCapabilities:
    """This worker's CUDA GPU, vllm package and device, for the web app's use_vllm option."""
    return capabilities()


@worker_ready.connect
def _probe_when_ready(sender: object = None, **_: object) -> None:
    """Probe in the background once the worker is up, so the first broadcast is answered at
    once; not where the broker has no fanout (the embedded SQLite one): nobody can ask there."""
    app = getattr(sender, "app", None)
    if app is not None and not app.connection_for_read().supports_exchange_type("fanout"):
        return
    threading.Thread(target=capabilities, name="capability-probe", daemon=True).start()


if __name__ == "__main__":
    print(json.dumps(probe()))
