"""What reporting costs the training thread per logging step: ``DeckCallback.on_log`` and the
worker's ``MetricsReporter.on_log`` next to trackio's ``log()``, same machine, same process,
same log dicts (about 25 metrics).

A live GRPO Deck (uvicorn on SQLite, tests/stack.py) receives both reporters' rows (the
worker's reporter reports to a run registered for it, with that run's token), so their sender
threads really post while the training thread is timed; trackio writes to a temporary local
project. Each call is timed alone (perf_counter_ns), after a warm-up.
Usage: python bench/callback_cost.py [--steps N] [--smoke]   (--smoke: 30 calls each, the same
path; tests/test_benches.py runs it so an API change cannot break the bench unnoticed)
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.conftest import live_stack

WARMUP = 50


def grpo_logs(step: int) -> dict[str, float]:
    """A log dict shaped like TRL's GRPOTrainer logs (about 25 keys)."""
    r = random.Random(step)
    names = ["loss", "grad_norm", "learning_rate", "num_tokens", "completions/mean_length",
             "completions/min_length", "completions/max_length", "completions/clipped_ratio",
             "completions/mean_terminated_length", "completions/min_terminated_length",
             "completions/max_terminated_length", "rewards/length_reward/mean",
             "rewards/length_reward/std", "reward", "reward_std", "frac_reward_zero_std",
             "entropy", "clip_ratio/low_mean", "clip_ratio/low_min", "clip_ratio/high_mean",
             "clip_ratio/high_max", "clip_ratio/region_mean", "kl", "step_time", "epoch"]
    return {name: r.random() for name in names}


def timed(call: Callable[[int], Any], steps: int) -> list[float]:
    """Microseconds per call, warm-up calls dropped."""
    out = []
    for step in range(1, steps + WARMUP + 1):
        t = time.perf_counter_ns()
        call(step)
        out.append((time.perf_counter_ns() - t) / 1_000)
    return out[WARMUP:]


def callback_costs(callback: Any, steps: int, output_dir: Path) -> tuple[list[float], int]:
    """Time ``callback.on_log`` as a trainer drives it; also how many rows its sender delivered."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    args = TrainingArguments(output_dir=str(output_dir), report_to="none")
    state, control = TrainerState(max_steps=steps + WARMUP), TrainerControl()
    callback.on_train_begin(args, state, control)

    def one(step: int) -> None:
        state.global_step = step
        callback.on_log(args, state, control, logs=grpo_logs(step))

    costs = timed(one, steps)
    sender = callback.sender
    callback.on_train_end(args, state, control)
    return costs, sender.state.rows_delivered if sender else 0


def deck_costs(url: str, steps: int, workdir: Path) -> tuple[list[float], int]:
    from grpodeck.client import DeckCallback

    deck = DeckCallback(url=url, name="bench-callback-cost", flush_seconds=1.0)
    return callback_costs(deck, steps, workdir / "out")


def worker_costs(url: str, steps: int, workdir: Path) -> tuple[list[float], int]:
    """The worker's reporter, on a run registered for it (its id and token)."""
    from grpodeck.client.run import register
    from grpodeck.contract.wire import ExternalRunIn
    from worker.training.reporting import MetricsReporter

    body = ExternalRunIn(source="external", name="bench-worker-reporter", spec={"model": "bench"})
    run = register(url, body, api_key=None, timeout=10.0)
    rep = MetricsReporter(url, run.id, run.token, spool_path=workdir / "worker" / "metrics.jsonl")
    try:
        return callback_costs(rep, steps, workdir / "worker")
    finally:
        rep.close()


def trackio_costs(steps: int, workdir: Path) -> list[float]:
    os.environ["TRACKIO_DIR"] = str(workdir / "trackio")
    import trackio

    trackio.init(project="bench-callback-cost", name="bench")
    costs = timed(lambda step: trackio.log(grpo_logs(step), step=step), steps)
    trackio.finish()
    return costs


def pct(values: list[float], q: float) -> float:
    """The q-th percentile within the timed calls: the default ("exclusive") method reaches
    past the slowest call on small samples (--smoke printed a p99 above its max)."""
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--smoke", action="store_true", help="30 calls each: seconds")
    args = parser.parse_args()
    steps = 30 if args.smoke else args.steps
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "deck").mkdir()
        with live_stack("embedded", Path(tmp) / "deck") as deck:
            deck_us, delivered = deck_costs(deck.url, steps, Path(tmp))
            worker_us, worker_delivered = worker_costs(deck.url, steps, Path(tmp))
        trackio_us = trackio_costs(steps, Path(tmp))
    print(f"{steps} on_log calls each (after {WARMUP} warm-up), microseconds per call")
    print(f"{'':16}{'p50':>10}{'p99':>10}{'max':>10}")
    timings = (("DeckCallback", deck_us), ("MetricsReporter", worker_us),
               ("trackio.log", trackio_us))
    for name, us in timings:
        print(f"{name:16}{pct(us, 50):10.1f}{pct(us, 99):10.1f}{max(us):10.1f}")
    for name, us in timings[:2]:
        print(f"ratio {name}/trackio: p50 {pct(us, 50) / pct(trackio_us, 50):.2f}x, "
              f"p99 {pct(us, 99) / pct(trackio_us, 99):.2f}x")
    print(f"rows delivered to the Deck: DeckCallback {delivered}, MetricsReporter "
          f"{worker_delivered}, of {steps + WARMUP} each")


if __name__ == "__main__":
    main()
