"""Nothing dropped on the way, at the issue's scale: ``grpodeck.client.init`` logging STEPS rows
with README-shaped rollouts every step, against a real Deck (uvicorn + SQLite, tests/stack.py).

Usage: python bench/client_spool.py [--steps 20000] [--down 30] [--step-ms 0] [--keep N]

``--down S``: nothing listens for the first S seconds of the run (``init`` included); the web
app starts then, on the same port. ``--step-ms``: simulated training time per step (without it
the loop runs as fast as ``log`` returns). Prints the loop's time, the time ``finish`` waited,
and what the Deck stored (metric steps, captured rollout steps) against what was logged.
Figures, not a test: tests/client/test_offline_live.py checks the same at a smaller size.

Issue 31, shared 2-core machine, SQLite, README-shaped rollouts (1 group x 4) every step:
- 20,000 steps as fast as the loop runs: ``log`` + ``log_rollouts`` 177-243 us/step (3.5-4.9 s
  for the loop); every metric step and every rollout step stored. ``finish`` waited 150 s for
  the spool to drain before the rollout store's one-DELETE-per-batch fix, 31 s after.
- Deck down for the first 30 s (``--down 30 --step-ms 2``: a 46 s loop): registered when the
  Deck answered, all 20,000 metric and rollout steps stored, ``finish`` waited 36 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.config import ROOT
from grpodeck.client import init
from tests.stack import Stack


def groups(step: int) -> list[dict]:  # type: ignore[type-arg]
    return [{"index": 0, "prompt": f"prompt {step}", "completions": [
        {"text": f"answer {i}", "rewards": {"correct": (step + i) % 3 / 2, "format": 1.0},
         "advantage": float(i - 1.5)} for i in range(4)]}]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--down", type=float, default=0.0)
    parser.add_argument("--step-ms", type=float, default=0.0)
    parser.add_argument("--keep", type=int, default=None, help="GRPODECK_ROLLOUT_MAX_STEPS "
                        "(default: every step, so that what was stored can be counted)")
    parser.add_argument("--smoke", action="store_true",
                        help="seconds: 200 steps, the Deck down for the first 2 s")
    a = parser.parse_args()
    if a.smoke:
        a.steps, a.down = 200, 2.0
    work = Path(tempfile.mkdtemp(prefix="client-spool-"))
    deck = Stack(f"sqlite:///{work / 'grpodeck.db'}", f"sqla+sqlite:///{work / 'broker.db'}", work,
                 extra_env={"GRPODECK_ROLLOUT_MAX_STEPS": str(a.keep or a.steps + 1)})
    subprocess.run([sys.executable, "-m", "app.cli", "migrate"], env=deck.env, cwd=ROOT,
                   check=True, timeout=120)
    starter = threading.Timer(a.down, deck.start_web)
    try:
        if a.down:
            starter.start()
        else:
            deck.start_web()
        began = time.monotonic()
        run = init(deck.url, "client-spool-bench", spool_dir=work / "spool", flush_seconds=0.5,
                   system_metrics=False, finish_deadline=600)
        for step in range(1, a.steps + 1):
            run.log({"loss": 1.0 / step, "reward": step % 7 / 7}, step=step)
            run.log_rollouts(step, groups(step))
            if a.step_ms:
                time.sleep(a.step_ms / 1000)
        looped = time.monotonic() - began
        # The Deck is known to come back (it starts --down s in): wait for it however long its
        # start takes, instead of finish's default patience for a Deck that is simply down.
        status = run.finish(timeout=600)
        waited = time.monotonic() - began - looped
        if a.down:
            starter.join()
        series = httpx.get(f"{deck.url}/api/runs/{run.id}/metrics", params={"names": "loss"},
                           timeout=120).json()["loss"]
        captured = httpx.get(f"{deck.url}/api/runs/{run.id}/rollouts", timeout=120).json()
        print(f"{a.steps} steps, Deck down for the first {a.down:.0f} s: loop {looped:.1f} s "
              f"({looped / a.steps * 1e6:.0f} us/step), finish waited {waited:.1f} s, "
              f"status {status}")
        print(f"stored: {len(series['steps'])} metric steps "
              f"(all logged: {series['steps'] == list(range(1, a.steps + 1))}), "
              f"{len(captured['steps'])} rollout steps "
              f"(all logged: {captured['steps'] == list(range(1, a.steps + 1))})")
    finally:
        starter.cancel()
        deck.stop()


if __name__ == "__main__":
    main()
