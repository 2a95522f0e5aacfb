"""The bare side of ``bench/gpu_check.py --scaling``: the same GRPO training as the Deck's, started
by ``accelerate launch`` with no GRPO Deck code around it (no reporter, no rollout capture).

Each rank builds TRL's ``GRPOTrainer`` from the spec with the Deck's own ``GRPOConfig`` mapping
(so both sides train the same thing); rank 0 prints the trainer's end-of-training summary
(``train_steps_per_second``, ...) as one JSON line prefixed ``SCALING `` for the caller.
``--smoke`` (instead of ``--spec``): one process, the tiny model, 2 steps (tests/test_benches.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PREFIX = "SCALING "
SMOKE_SPEC = {"name": "scaling-smoke", "model": "builtin:tiny-random",
              "dataset": "builtin:short-prompts", "num_generations": 4, "max_steps": 2,
              "max_completion_length": 8, "logging_steps": 1,
              "rewards": [{"name": "length_target", "params": {"target": 20}}]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--spec", help="run spec JSON file")
    group.add_argument("--smoke", action="store_true", help="the tiny model, 2 steps")
    args = parser.parse_args()
    from trl import GRPOTrainer

    from grpodeck.contract.spec import RunSpec
    from worker.rewards.registry import build_rewards
    from worker.training.config import build_grpo_config
    from worker.training.datasets import load_prompts
    from worker.training.models import load_model_and_tokenizer

    spec = (RunSpec.model_validate(SMOKE_SPEC) if args.smoke
            else RunSpec.model_validate_json(Path(args.spec).read_text()))
    model, tokenizer = load_model_and_tokenizer(spec.model)
    train_ds, _ = load_prompts(spec)
    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(model=model, processing_class=tokenizer,
                              args=build_grpo_config(spec, out),
                              reward_funcs=build_rewards(spec),
                              train_dataset=train_ds)
        result = trainer.train()
    if trainer.accelerator.is_main_process:
        print(PREFIX + json.dumps({**result.metrics,
                                   "processes": trainer.accelerator.num_processes}), flush=True)


if __name__ == "__main__":
    main()
