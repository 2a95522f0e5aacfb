"""Device slots (worker.slots): the settings are read strictly, and a slot is held by one process
at a time, across real processes (Celery's prefork children are separate processes)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.core.config import ROOT
from worker.slots import (
    NotWanted,
    Slot,
    SlotConfigError,
    configured_slots,
    parse_slots,
    split_devices,
    take_slot,
)


def test_slots_are_read_from_the_setting() -> None:
    assert parse_slots("0,1;2,3") == [Slot(0, ("0", "1")), Slot(1, ("2", "3"))]
    assert parse_slots(" 0 ; 1 ;") == [Slot(0, ("0",)), Slot(1, ("1",))]
    assert parse_slots("GPU-8f3e2a;MIG-1c2d")[1].visible == "MIG-1c2d"
    assert parse_slots("0,1;2,3")[0].visible == "0,1"


@pytest.mark.parametrize(("text", "reason"), [
    ("0,1;1,2", "device 1 is in slot 1 and slot 2"),
    ("0;;1", "slot 2 has an empty device"),
    ("0,,1", "slot 1 has an empty device"),
    ("0;1 2", "'1 2' is not a device index or GPU UUID"),
    ("0;$(reboot)", "is not a device index"),
    ("  ", "GRPODECK_DEVICE_SLOTS is empty"),
])
def test_a_bad_slot_setting_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(SlotConfigError, match="GRPODECK_DEVICE_SLOTS") as caught:
        parse_slots(text)
    assert reason in str(caught.value)


def test_gpus_per_run_splits_the_found_gpus() -> None:
    assert split_devices(["0", "1", "2", "3"], 2) == [Slot(0, ("0", "1")), Slot(1, ("2", "3"))]
    assert split_devices(["0", "1", "2"], 2) == [Slot(0, ("0", "1"))]  # GPU 2 is left unused
    with pytest.raises(SlotConfigError, match=r"GRPODECK_GPUS_PER_RUN=2, but this worker finds 1"):
        split_devices(["0"], 2)
    assert configured_slots(None, 1, detect=lambda: ["4", "5"]) == [Slot(0, ("4",)),
                                                                   Slot(1, ("5",))]
    assert configured_slots(None, None) is None
    assert configured_slots("0;1", None, detect=lambda: ["0", "1", "2"]) == parse_slots("0;1")
    with pytest.raises(SlotConfigError, match=r"GRPODECK_DEVICE_SLOTS='0;1', but this worker "
                       r"finds no GPU"):  # no nvidia-smi, nothing visible (issue 33)
        configured_slots("0;1", None, detect=list)
    with pytest.raises(SlotConfigError, match=r"names GPU\(s\) 2,3, but this worker finds 0,1"):
        configured_slots("0,1;2,3", None, detect=lambda: ["0", "1"])
    with pytest.raises(SlotConfigError, match="not both"):
        configured_slots("0;1", 1)


HOLDER = """
import sys
from pathlib import Path
from worker.slots import parse_slots, take_slot
with take_slot(parse_slots(sys.argv[1]), Path(sys.argv[2]), poll_seconds=0.05) as slot:
    print(slot.index, flush=True)
    sys.stdin.read()  # hold the slot until the test closes our stdin
"""


def _holder(slots: str, lock_dir: Path) -> subprocess.Popen[str]:
    """A separate process (as Celery's prefork children are) that takes a slot and prints it."""
    return subprocess.Popen([sys.executable, "-c", HOLDER, slots, str(lock_dir)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _slot_of(proc: subprocess.Popen[str], within: float) -> int | None:
    """The slot ``proc`` printed within ``within`` seconds, or None while it is still waiting."""
    ready, _, _ = select.select([proc.stdout], [], [], within)
    return int(proc.stdout.readline()) if ready and proc.stdout else None


def test_each_process_takes_its_own_slot_and_a_third_waits_for_a_free_one(tmp_path: Path) -> None:
    procs: list[subprocess.Popen[str]] = []
    try:
        procs += [_holder("0,1;2,3", tmp_path), _holder("0,1;2,3", tmp_path)]
        first = [_slot_of(p, 60) for p in procs]
        assert sorted(first) == [0, 1], first  # disjoint: one slot each  # type: ignore[type-var]
        procs.append(_holder("0,1;2,3", tmp_path))
        assert _slot_of(procs[2], 3) is None  # both slots are held: the third must wait
        giver = procs[first.index(1)]
        assert giver.stdin
        giver.stdin.close()  # the holder of slot 1 finishes
        giver.wait(30)
        assert _slot_of(procs[2], 60) == 1  # and the waiting process gets that slot
        procs.append(_holder("0,1;2,3", tmp_path))
        assert _slot_of(procs[3], 3) is None
        procs[first.index(0)].send_signal(signal.SIGKILL)  # a killed process frees its slot
        assert _slot_of(procs[3], 60) == 0
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(30)


def test_overlapping_slots_of_two_workers_never_share_a_device(tmp_path: Path) -> None:
    """Two workers on one host may be configured to overlap: a slot is taken only when every
    one of its devices is free."""
    with take_slot(parse_slots("0,1"), tmp_path) as mine:
        assert mine.devices == ("0", "1")
        other = parse_slots("1,2;3")  # another worker's slots: "1,2" overlaps on GPU 1
        with take_slot(other, tmp_path, poll_seconds=0.05) as theirs:
            assert theirs.devices == ("3",)
    with take_slot(parse_slots("1,2;3"), tmp_path) as later:
        assert later.devices == ("1", "2")  # free again once released


def test_the_capability_probe_sees_the_first_slots_devices(tmp_path: Path) -> None:
    """The probe is a real child process (python -m worker.capabilities), started as a
    training child is: with the first slot's CUDA_VISIBLE_DEVICES."""
    code = "import json; from worker.capabilities import capabilities; print(json.dumps(capabilities()))"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    base = {**env, "GRPODECK_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.db'}"}
    found = {}
    for name, extra in (("slots", {"GRPODECK_DEVICE_SLOTS": "3,4;5",
                                    "CUDA_VISIBLE_DEVICES": "3,4,5"}), ("none", {})):
        done = subprocess.run([sys.executable, "-c", code], env={**base, **extra}, cwd=ROOT,
                              capture_output=True, text=True, timeout=300, check=True)
        found[name] = json.loads(done.stdout.strip().splitlines()[-1])["device"]
    assert found["slots"].endswith("[CUDA_VISIBLE_DEVICES=3,4]"), found
    assert "CUDA_VISIBLE_DEVICES" not in found["none"], found  # no slots: all devices


def test_a_wait_for_a_slot_ends_once_the_run_is_no_longer_wanted(tmp_path: Path) -> None:
    """A task whose run was cancelled, or claimed by another worker (a redelivery), stops
    waiting: asked at once when all slots are taken, then every ``recheck_seconds``; a free slot
    is taken without asking."""
    slots = parse_slots("0")
    asked: list[bool] = []
    ended: list[BaseException] = []

    def wanted_twice() -> bool:
        asked.append(len(asked) < 2)
        return asked[-1]

    def wait_for_the_held_slot() -> None:
        try:
            with take_slot(slots, tmp_path, poll_seconds=0.01, still_wanted=wanted_twice,
                           recheck_seconds=0.05):
                ended.append(AssertionError("the slot is held: this cannot get it"))
        except NotWanted as exc:
            ended.append(exc)

    with take_slot(slots, tmp_path, still_wanted=wanted_twice) as slot:
        assert slot.index == 0 and asked == []  # free: nobody asked
        waiter = threading.Thread(target=wait_for_the_held_slot, daemon=True)
        waiter.start()
        waiter.join(timeout=60)  # a wait that never ends fails here, not at the suite's limit
        assert not waiter.is_alive(), "the wait went on after the run was no longer wanted"
        assert [type(e) for e in ended] == [NotWanted] and asked == [True, True, False]
    with take_slot(slots, tmp_path) as again:  # the given-up wait left the slot free
        assert again.index == 0
