"""A stock TRL GRPO script that reports with ``report_to="mlflow"`` and nothing from GRPO Deck:
where it reports is only the environment (``MLFLOW_TRACKING_URI``, ``MLFLOW_TRACKING_TOKEN``,
``MLFLOW_EXPERIMENT_NAME``). Run as its own process by tests/client/test_mlflow_live.py."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer


def length_reward(completions: list[str], **_: object) -> list[float]:
    return [-abs(len(c) - 20) / 20 for c in completions]


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--model", "--name", "--out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--steps", type=int, default=4)
    a = parser.parse_args()
    prompts = [f"Tell me about {s}." for s in ("cats", "rain", "maps", "tea", "salt", "bees")]
    config = GRPOConfig(output_dir=a.out, run_name=a.name, max_steps=a.steps,
                        per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=16, logging_steps=1, learning_rate=1e-4,
                        save_strategy="no", report_to="mlflow", disable_tqdm=True, use_cpu=True,
                        seed=0)
    trainer = GRPOTrainer(model=a.model, reward_funcs=length_reward, args=config,
                          train_dataset=Dataset.from_dict({"prompt": prompts * 50}))
    trainer.train()
    logged = [r for r in trainer.state.log_history if "loss" in r]
    Path(a.out, "logged.json").write_text(json.dumps(logged))


if __name__ == "__main__":
    main()
