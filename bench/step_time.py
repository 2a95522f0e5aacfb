"""Seconds per GRPO step on this machine for the two built-in models.

Runs the real trainer (same config path as a worker run, without metric reporting) and times
each optimizer step with a callback, ignoring the first (warm-up) step.
Usage: python bench/step_time.py [--steps N] [--smoke]   (--smoke: 2 steps of the tiny model
only, the same path; tests/test_benches.py runs it)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from transformers import TrainerCallback


class StepTimer(TrainerCallback):
    """Wall time of each training step (generation + reward + backward + optimizer)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._t = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._t)


def bench(model_ref: str, max_completion_length: int, steps: int) -> list[float]:
    from trl import GRPOTrainer

    from grpodeck.contract.spec import RunSpec
    from worker.rewards.registry import build_rewards
    from worker.training.config import build_grpo_config
    from worker.training.datasets import load_prompts
    from worker.training.models import load_model_and_tokenizer

    spec = RunSpec(model=model_ref, dataset="builtin:short-prompts", num_generations=4,
                   max_steps=steps, max_completion_length=max_completion_length, logging_steps=steps)
    model, tokenizer = load_model_and_tokenizer(spec.model)
    train_ds, _ = load_prompts(spec)
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=build_grpo_config(spec, out),
                              reward_funcs=build_rewards(spec),
                              train_dataset=train_ds, callbacks=[timer])
        trainer.train()
    return timer.times[1:] or timer.times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="2 steps of the tiny model only")
    args = parser.parse_args()
    results = [("builtin:tiny-random", 32, max(args.steps, 6)),
               ("builtin:smollm2-135m-instruct", 64, args.steps)]
    lines = []
    if args.smoke:
        results = [("builtin:tiny-random", 8, 2)]
        lines.append("smoke mode: builtin:smollm2-135m-instruct skipped")
    for ref, length, steps in results:
        times = bench(ref, length, steps)
        lines.append(f"{ref:32s} G=4 max_completion_length={length:3d}: "
                     f"{statistics.median(times):6.2f} s/step (median of {len(times)}, "
                     f"min {min(times):.2f}, max {max(times):.2f})")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
