"""One GPU box, several runs at once: a real worker with two device slots trains two runs side
by side, each training child seeing only its own slot's devices (its CUDA_VISIBLE_DEVICES, read
back from the run's Logs tab), a run cancelled while it waits for a slot stops waiting, and
another waits for a slot to be given back. On a CPU
machine the device ids are only names, which is all this test needs: what each child is told."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import TINY
from tests.integration.conftest import live_stack
from tests.stack import TERMINAL, Stack

CHILD_LINE = re.compile(r"devices: CUDA_VISIBLE_DEVICES=(\S+)")


@pytest.fixture(scope="module")
def slotted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Two slots and three pool processes: the third task reaches a pool process and must wait
    there for a slot (the lock, not Celery's concurrency, keeps it off the taken devices)."""
    workdir: Path = tmp_path_factory.mktemp("slots")
    env = {"GRPODECK_DEVICE_SLOTS": "0;1", "GRPODECK_DEVICE_LOCKS_DIR": str(workdir / "locks"),
           "CUDA_VISIBLE_DEVICES": "0,1",  # the devices it finds (a CPU machine has none)
           "GRPODECK_SLOT_RECHECK_SECONDS": "1"}
    with live_stack("postgres-redis", workdir, extra_env=env, worker_concurrency=3) as live:
        yield live


def devices_of(stack: Stack, run_id: int) -> str | None:
    """The CUDA_VISIBLE_DEVICES its training child logged (None until it has)."""
    text = httpx.get(f"{stack.url}/runs/{run_id}/logs.txt", timeout=10).text
    found = CHILD_LINE.findall(text)
    return found[0] if found else None


def worker_says(stack: Stack, line: str) -> bool:
    return line in (stack.workdir / "worker.log").read_text()


def cancel(stack: Stack, run_id: int) -> dict[str, object]:
    httpx.post(f"{stack.url}/api/runs/{run_id}/cancel", timeout=10)
    return stack.wait_for(run_id, TERMINAL, timeout=120)


def test_two_runs_get_disjoint_devices_and_a_third_waits_for_a_free_slot(slotted: Stack) -> None:
    stack = slotted
    spec = {**TINY, "rewards": [{"name": "length_target"}]}
    first = stack.launch(name="slot-a", max_steps=10_000, **spec)
    second = stack.launch(name="slot-b", max_steps=10_000, **spec)
    for run_id in (first, second):
        stack.wait_until(lambda r=run_id: devices_of(stack, r) is not None,
                         f"run {run_id}'s child logged its devices", timeout=300)
    seen = {run_id: devices_of(stack, run_id) for run_id in (first, second)}
    assert sorted(seen.values()) == ["0", "1"], seen  # side by side, one slot each
    assert {stack.run(r)["status"] for r in (first, second)} == {"running"}
    logs = httpx.get(f"{stack.url}/runs/{first}/logs.txt", timeout=10).text
    assert f"device slot {int(seen[first]) + 1}: CUDA_VISIBLE_DEVICES={seen[first]}" in logs
    page = httpx.get(f"{stack.url}/runs/{first}", timeout=10).text  # the Devices panel
    assert f"slot {int(seen[first]) + 1}: CUDA_VISIBLE_DEVICES={seen[first]}</dd>" in page

    # A run cancelled while it waits frees its pool process (it asks the web app while it
    # waits): without that, the fourth run below found no pool process to wait in.
    cancelled = stack.launch(name="slot-cancelled", max_steps=2, **spec)
    stack.wait_until(lambda: worker_says(stack, f"run {cancelled} waits for a free device slot"),
                     "the third run waits for a slot")
    assert cancel(stack, cancelled)["status"] == "cancelled"
    stack.wait_until(lambda: worker_says(stack, f"run {cancelled} not started: no longer waits"),
                     "the cancelled run stops waiting", timeout=60)

    third = stack.launch(name="slot-c", max_steps=2, **spec)
    stack.wait_until(lambda: worker_says(stack, f"run {third} waits for a free device slot"),
                     "the fourth run waits for a slot in the freed pool process")
    assert stack.run(third)["status"] == "queued"  # waiting: not claimed, not on a taken slot
    assert devices_of(stack, third) is None

    assert cancel(stack, first)["status"] == "cancelled"
    run = stack.wait_for(third, TERMINAL, timeout=300)
    assert run["status"] == "succeeded", run
    assert devices_of(stack, third) == seen[first]  # the slot that was given back
    assert stack.run(second)["status"] == "running"
    cancel(stack, second)
