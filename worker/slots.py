"""Device slots: which GPUs each of a worker's concurrent runs may see.

One GPU box can serve several runs at once: the worker is given slots (``GRPODECK_DEVICE_SLOTS=
"0,1;2,3"``, or ``GRPODECK_GPUS_PER_RUN=2`` to split the GPUs it finds), runs with one Celery
pool process per slot, and each training task takes a free slot and starts its training child
with ``CUDA_VISIBLE_DEVICES`` set to that slot's devices. With neither setting nothing changes:
one run at a time, every device visible.

Why a lock file per device rather than Celery's pool-process index: the pool processes are
separate processes (prefork) that Celery may replace at any time, and two workers on one host
may be configured to overlap. ``flock`` is held by the open file, is released by the kernel when
its process dies (a ``kill -9`` frees the slot), and a slot is taken only when *every* one of its
devices is, so no two runs on this host ever share a device through these locks.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
# An index ("0"), a GPU or MIG UUID ("GPU-8f3e...", "MIG-..."): what CUDA_VISIBLE_DEVICES takes.
DEVICE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$")


class SlotConfigError(ValueError):
    """The slot settings cannot be used; the message names the setting and what is wrong."""


@dataclass(frozen=True)
class Slot:
    index: int
    devices: tuple[str, ...]

    @property
    def visible(self) -> str:
        """The value of ``CUDA_VISIBLE_DEVICES`` for a child in this slot."""
        return ",".join(self.devices)


def parse_slots(text: str) -> list[Slot]:
    """``"0,1;2,3"`` -> two slots of two devices. Refuses empty slots, odd device names and a
    device in two slots (two runs would share its memory)."""
    groups = [g.strip() for g in text.strip().rstrip(";").split(";")]
    if not text.strip():
        raise SlotConfigError("GRPODECK_DEVICE_SLOTS is empty: give slots like \"0,1;2,3\" "
                              "(';' between slots, ',' between the devices of one slot)")
    slots: list[Slot] = []
    seen: dict[str, int] = {}
    for i, group in enumerate(groups):
        devices = tuple(d.strip() for d in group.split(","))
        if not group or "" in devices:
            raise SlotConfigError(f"GRPODECK_DEVICE_SLOTS={text!r}: slot {i + 1} has an empty "
                                  "device; write slots like \"0,1;2,3\"")
        for device in devices:
            if not DEVICE_ID.match(device):
                raise SlotConfigError(f"GRPODECK_DEVICE_SLOTS={text!r}: {device!r} is not a "
                                      "device index or GPU UUID")
            if device in seen:
                raise SlotConfigError(f"GRPODECK_DEVICE_SLOTS={text!r}: device {device} is in "
                                      f"slot {seen[device] + 1} and slot {i + 1}; a device "
                                      "belongs to one slot")
            seen[device] = i
        slots.append(Slot(i, devices))
    return slots


def split_devices(devices: list[str], per_run: int) -> list[Slot]:
    """The found devices in consecutive groups of ``per_run``; devices left over are unused."""
    if per_run < 1:
        raise SlotConfigError(f"GRPODECK_GPUS_PER_RUN={per_run}: must be 1 or more")
    if len(devices) < per_run:
        raise SlotConfigError(f"GRPODECK_GPUS_PER_RUN={per_run}, but this worker finds "
                              f"{len(devices)} GPU(s) ({','.join(devices) or 'none'}); set "
                              "GRPODECK_DEVICE_SLOTS to name them, or lower it")
    count = len(devices) // per_run
    if len(devices) % per_run:
        log.warning("GRPODECK_GPUS_PER_RUN=%d: GPU(s) %s left unused", per_run,
                    ",".join(devices[count * per_run:]))
    return [Slot(i, tuple(devices[i * per_run:(i + 1) * per_run])) for i in range(count)]


def detect_gpus() -> list[str]:
    """The GPUs this process may use, without importing torch into the worker's main process:
    ``CUDA_VISIBLE_DEVICES`` when set, else the indices ``nvidia-smi`` lists (none when absent)."""
    visible = os.environ.get(VISIBLE_ENV)
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        done = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def configured_slots(device_slots: str | None, gpus_per_run: int | None,
                     detect: Callable[[], list[str]] = detect_gpus) -> list[Slot] | None:
    """The worker's slots from its two settings; ``None`` when neither is set."""
    if device_slots is not None and gpus_per_run is not None:
        raise SlotConfigError("set GRPODECK_DEVICE_SLOTS or GRPODECK_GPUS_PER_RUN, not both")
    if device_slots is not None:
        slots = parse_slots(device_slots)
        found = detect()
        if not found:  # the README's promise: a missing GPU stops the worker, not its runs
            raise SlotConfigError(f"GRPODECK_DEVICE_SLOTS={device_slots!r}, but this worker "
                                  "finds no GPU (CUDA_VISIBLE_DEVICES names none, and nvidia-smi "
                                  "is missing or lists none); unset it to train on the CPU")
        missing = [d for slot in slots for d in slot.devices if d not in found]
        if missing:  # a child would fail at its first CUDA call, long after the launch
            raise SlotConfigError(f"GRPODECK_DEVICE_SLOTS={device_slots!r} names GPU(s) "
                                  f"{','.join(missing)}, but this worker finds "
                                  f"{','.join(found)}")
        return slots
    if gpus_per_run is not None:
        return split_devices(detect(), gpus_per_run)
    return None


def _lock_name(device: str) -> str:
    return "device-" + re.sub(r"[^A-Za-z0-9_.-]", "_", device) + ".lock"


def _try_take(slot: Slot, lock_dir: Path) -> list[IO[bytes]] | None:
    """Every device lock of ``slot`` (sorted, so overlapping slots cannot deadlock), or None
    with nothing held."""
    held: list[IO[bytes]] = []
    for device in sorted(slot.devices):
        fh = (lock_dir / _lock_name(device)).open("ab")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            for other in held:
                other.close()
            return None
        held.append(fh)
    return held


class NotWanted(Exception):
    """Given up waiting for a slot: ``still_wanted`` said the run no longer needs one."""


@contextmanager
def take_slot(slots: list[Slot], lock_dir: Path, poll_seconds: float = 1.0,
              on_wait: Callable[[], None] | None = None,
              still_wanted: Callable[[], bool] | None = None,
              recheck_seconds: float = 10.0) -> Iterator[Slot]:
    """Hold the first free slot for the ``with`` block, waiting (polling) while all are taken;
    ``on_wait`` is called once when this has to wait. While waiting, ``still_wanted`` is asked
    at once and then every ``recheck_seconds``: False raises ``NotWanted`` (the run was
    cancelled, or is a redelivered task of a run that another process already trains: without
    it such a task held its pool process until a slot freed, maybe when that run ended)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    waited = False
    asked_at = -math.inf
    while True:
        for slot in slots:
            held = _try_take(slot, lock_dir)
            if held is not None:
                try:
                    yield slot
                finally:
                    for fh in held:
                        fh.close()
                return
        if not waited and on_wait is not None:
            on_wait()
        waited = True
        if still_wanted is not None and time.monotonic() - asked_at >= recheck_seconds:
            if not still_wanted():
                raise NotWanted
            asked_at = time.monotonic()
        time.sleep(poll_seconds)


@lru_cache
def worker_slots() -> list[Slot] | None:
    """This worker's slots from its settings (found once: detection may run nvidia-smi)."""
    from worker.settings import get_settings

    settings = get_settings()
    return configured_slots(settings.device_slots, settings.gpus_per_run)


def slot_env(slot: Slot | None) -> dict[str, str]:
    """The training child's device variable: the slot's devices; none without slots (the
    child then sees what the worker sees)."""
    return {} if slot is None else {VISIBLE_ENV: slot.visible}
