"""A plain TRL GRPO script, as a user writes it, plus the two lines that report it to GRPO Deck.

Run as its own process by tests/client (no Celery, no worker code): stock ``trl.GRPOTrainer`` on
a local model directory. ``--times FILE`` records each step's end (monotonic seconds), so a test
can tell whether steps waited on the network; ``--trackio`` also logs to trackio.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from grpodeck.client import DeckCallback


def length_reward(completions: list[str], **_: object) -> list[float]:
    return [-abs(len(c) - 20) / 20 for c in completions]


def constant_reward(completions: list[str], **_: object) -> list[float]:
    return [0.0 for _ in completions]


class StepTimes(TrainerCallback):
    """Append each step's end time to a file (the test's clock on the training thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        with self.path.open("a") as fh:
            fh.write(json.dumps({"step": state.global_step, "t": time.monotonic()}) + "\n")


CLIENT_TIMEOUT_S = 5.0  # a request to a frozen server hangs this long (the outage test's yardstick)


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--model", "--url", "--name", "--out"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--times")
    parser.add_argument("--trackio", action="store_true",
                        help="also report_to trackio (its store: $TRACKIO_DIR, read at import)")
    parser.add_argument("--no-attach", action="store_true")
    parser.add_argument("--guard-rail", action="store_true",
                        help="a constant reward and stop_on_critical: the Deck's rail stops it")
    parser.add_argument("--tags", default="", help="comma-separated DeckCallback tags")
    parser.add_argument("--group")
    parser.add_argument("--alert-url", help="one alert destination (DeckCallback alerts=)")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--api-key")
    parser.add_argument("--save-steps", type=int, default=0,
                        help="checkpoint every N steps and upload them (DeckCallback artifacts=)")
    parser.add_argument("--eval-prompts", type=int, default=0,
                        help="evaluate on this many prompts every --eval-steps steps")
    parser.add_argument("--eval-steps", type=int, default=1)
    a = parser.parse_args()
    prompts = [f"Tell me about {s}." for s in ("cats", "rain", "maps", "tea", "salt", "bees")]
    report_to = "trackio" if a.trackio else "none"
    config = GRPOConfig(output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=4,
                        num_generations=4, max_completion_length=16, logging_steps=1,
                        learning_rate=1e-4, report_to=report_to,
                        save_strategy="steps" if a.save_steps else "no",
                        save_steps=a.save_steps or 500,
                        disable_tqdm=True, use_cpu=True, seed=0,
                        eval_strategy="steps" if a.eval_prompts else "no",
                        eval_steps=a.eval_steps, per_device_eval_batch_size=4)
    alerts = {"urls": [a.alert_url], "min_severity": "critical"} if a.alert_url else None
    deck = DeckCallback(url=a.url, name=a.name, flush_seconds=0.5, stop_on_critical=a.guard_rail,
                        timeout=CLIENT_TIMEOUT_S, tags=[t for t in a.tags.split(",") if t],
                        group=a.group, alerts=alerts, strict=a.strict, api_key=a.api_key,
                        artifacts=a.save_steps > 0)
    callbacks = [deck] + ([StepTimes(Path(a.times))] if a.times else [])
    reward = constant_reward if a.guard_rail else length_reward
    trainer = GRPOTrainer(model=a.model, reward_funcs=reward, args=config,
                          train_dataset=Dataset.from_dict({"prompt": prompts * 50}),
                          eval_dataset=Dataset.from_dict(
                              {"prompt": (prompts * a.eval_prompts)[:a.eval_prompts]})
                          if a.eval_prompts else None,
                          callbacks=callbacks)
    if not a.no_attach:
        deck.attach(trainer)
    trainer.train()
    logged = [r for r in trainer.state.log_history if "loss" in r]
    Path(a.out, "logged.json").write_text(json.dumps(logged))
    Path(a.out, "deck.json").write_text(json.dumps({"stopped_reason": deck.stopped_reason}))


if __name__ == "__main__":
    main()
