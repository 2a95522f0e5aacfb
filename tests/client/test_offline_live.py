"""Nothing logged through ``grpodeck.client.init`` is lost when the Deck is away, against a
real Deck (uvicorn + SQLite, started by the test only when it should answer):

- down when ``init`` runs and for the first part of the run (several sender retries): the run
  is registered when the Deck answers and every step and rollout is stored once;
- down for the whole run (a process that exits): ``finish`` prints one line naming what was not
  delivered and the ``grpodeck-client sync DIR`` command; that command registers the run and
  stores every step and rollout once, and a second sync stores nothing twice;
- a fast loop logging rollouts every step (far past the old in-memory bound of 20 captured
  steps) loses none.

The outage here lasts until the sender has failed several times (a few seconds covering
``init`` and several batches), not the issue's 30 s: the code path is the same back-off.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core.config import ROOT
from grpodeck.client import init
from grpodeck.client.rundir import find
from tests.stack import Stack, migrated_sqlite

LOOP = Path(__file__).with_name("offline_loop.py")
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}"}


@pytest.fixture(scope="module")
def deck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A migrated Deck whose web app is started by each test when it should answer."""
    with migrated_sqlite(tmp_path_factory.mktemp("offline-deck"),
                         {"GRPODECK_ROLLOUT_MAX_STEPS": "100000"}) as live:
        yield live


def down(deck: Stack) -> None:
    if "web" in deck.named and deck.named["web"].poll() is None:
        deck.kill("web")


def up(deck: Stack) -> None:
    if "web" not in deck.named or deck.named["web"].poll() is not None:
        deck.start_web()


def loss_steps(deck: Stack, run_id: int) -> tuple[list[int], list[float]]:
    series = httpx.get(f"{deck.url}/api/runs/{run_id}/metrics", params={"names": "loss"},
                       timeout=30).json()["loss"]
    return series["steps"], series["values"]


def rollout_steps(deck: Stack, run_id: int) -> list[int]:
    return httpx.get(f"{deck.url}/api/runs/{run_id}/rollouts", timeout=30).json()["steps"]


def runs_named(deck: Stack, name: str) -> list[dict]:  # type: ignore[type-arg]
    runs = httpx.get(f"{deck.url}/api/runs", params={"archived": "all"}, timeout=10).json()
    return [r for r in runs if r["name"] == name]


def group(step: int) -> list[dict]:  # type: ignore[type-arg]
    return [{"index": 0, "prompt": f"p{step}", "completions": [
        {"text": "a", "rewards": {"correct": 0.4}, "advantage": 0.5},
        {"text": "b", "rewards": {"correct": 0.21}, "advantage": -0.5}]}]


def test_the_deck_down_at_init_and_for_the_first_part_of_a_run_loses_nothing(
        deck: Stack, tmp_path: Path) -> None:
    down(deck)
    run = init(deck.url, "down-at-first", spool_dir=tmp_path, flush_seconds=0.2,
               system_metrics=False, finish_deadline=120)
    assert run.id is None and run.sender is not None
    for step in range(1, 101):  # nothing answers: spooled, never dropped
        run.log({"loss": 1.0 / step}, step=step)
        run.log_rollouts(step, group(step))
    deck.wait_until(lambda: run.sender is not None and run.sender.state.failures >= 3,
                    "several registration attempts while the Deck is down", timeout=60)
    assert run.id is None
    up(deck)
    deck.wait_until(lambda: run.id is not None, "the sender registers the run", timeout=60)
    for step in range(101, 201):
        run.log({"loss": 1.0 / step}, step=step)
        run.log_rollouts(step, group(step))
    assert run.finish() == "succeeded"
    steps, values = loss_steps(deck, run.id)
    assert steps == list(range(1, 201))
    assert values == pytest.approx([1.0 / s for s in steps])
    assert rollout_steps(deck, run.id) == list(range(1, 201))
    assert [r["id"] for r in runs_named(deck, "down-at-first")] == [run.id]  # registered once
    (spool,) = find(tmp_path)
    rows = [json.loads(line) for line in spool.metrics_path.read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 201))  # the run's own order ...
    assert all(a["time"] <= b["time"] for a, b in itertools.pairwise(rows))  # ... times
    assert spool.registration() is not None and spool.registration().id == run.id
    assert spool.finish() == {"returncode": 0, "error": None, "sent": True}


def sync(folder: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grpodeck.client.cli", "sync", str(folder),
                           "--url", url], env=ENV, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_deck_down_for_the_whole_run_then_sync_stores_everything_once(
        deck: Stack, tmp_path: Path) -> None:
    down(deck)
    done = subprocess.run([sys.executable, str(LOOP), "--url", deck.url, "--spool",
                           str(tmp_path), "--name", "down-all-run", "--steps", "150",
                           "--rollout-every", "3"], env=ENV, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (spool,) = find(tmp_path)
    lines = [line for line in done.stderr.splitlines() if "not delivered" in line]
    assert len(lines) == 1, done.stderr[-3000:]
    assert "150 rows and 50 rollout steps were not delivered" in lines[0]
    assert f"grpodeck-client sync {spool.path}" in lines[0]
    assert spool.registration() is None
    up(deck)
    first = sync(tmp_path, deck.url)
    assert first.returncode == 0, first.stderr
    assert "delivered 150 rows and 50 rollout steps, ended succeeded" in first.stdout
    (stored,) = runs_named(deck, "down-all-run")
    assert stored["status"] == "succeeded" and stored["spec"]["lr"] == 0.1
    steps, values = loss_steps(deck, stored["id"])
    assert steps == list(range(1, 151))
    assert values == pytest.approx([1.0 / s for s in steps])
    assert rollout_steps(deck, stored["id"]) == list(range(3, 151, 3))
    again = sync(spool.path, deck.url)
    assert again.returncode == 0, again.stderr
    assert "nothing left to deliver" in again.stdout
    assert [r["id"] for r in runs_named(deck, "down-all-run")] == [stored["id"]]
    assert loss_steps(deck, stored["id"])[0] == steps
    assert rollout_steps(deck, stored["id"]) == list(range(3, 151, 3))


def test_a_fast_loop_logging_rollouts_every_step_loses_none(deck: Stack,
                                                           tmp_path: Path) -> None:
    """2,000 captured steps as fast as the loop can log (the old sender kept the latest 20
    in memory and dropped the rest)."""
    up(deck)
    run = init(deck.url, "fast-rollouts", spool_dir=tmp_path, flush_seconds=0.2,
               system_metrics=False)
    for step in range(1, 2001):
        run.log({"loss": 1.0 / step}, step=step)
        run.log_rollouts(step, group(step))
    assert run.finish() == "succeeded"
    assert rollout_steps(deck, run.id) == list(range(1, 2001))
    assert loss_steps(deck, run.id)[0] == list(range(1, 2001))
