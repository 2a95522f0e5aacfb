"""SIMULATED training logs in other trainers' shapes (verl, a hand-written loop, OpenRLHF).

These are not real runs: each is drawn from a documented model (numpy, fixed seed, so the same
bytes every time) to exercise the readers and the diagnosis of logs the Deck did not write.
The real logs in /work/shared/data/real-grpo-logs are never copied into the repository.

  verl_collapse.console.log   verl's console lines (``step:N - key:value - ...``) as Ray prints
      them (``(TaskRunner pid=...)`` prefix, ANSI colours, numpy-2 ``np.float64(...)`` values):
      the task score rises 0.2 -> 0.6 over 60 steps, then falls to ~0.08 by step 75 and stays
      there (a reward collapse); entropy, KL loss, response length move with it.
  handwritten_stalled.log     a hand-written loop's ``Step N | Reward: .. | KL_ref: .. | Loss:
      ..`` lines, keys the Deck does not know: the reward stays flat at ~0.3 for 150 steps (a
      stall) — read only with ``--map Reward=reward --map KL_ref=kl --map Loss=loss``.
  openrlhf_length.jsonl       OpenRLHF's wandb-style rows (``train/global_step``,
      ``train/reward``, ``train/kl``, ``train/response_length``, ``train/policy_loss``,
      ``train/return``): the response length grows 200 -> ~800 tokens while the reward stays
      flat (length growth without reward gain).

Usage: python bench/simulated_logs.py OUT_DIR   (writes the three files, prints their paths)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

SEED = 23
PID = 4242
CYAN, RESET = "\x1b[36m", "\x1b[0m"


def _np(value: float) -> str:
    """A value as verl's ``pprint.pformat`` prints a numpy-2 scalar."""
    return f"np.float64({value!r})"


def verl_collapse(steps: int = 120, seed: int = SEED) -> str:
    """verl console log of a run whose task score collapses after step 60."""
    rng = np.random.default_rng(seed)
    lines = [f"{CYAN}(TaskRunner pid={PID}){RESET} Training from scratch", ""]
    for step in range(1, steps + 1):
        if step <= 60:
            score = 0.2 + 0.4 * step / 60
        else:
            score = max(0.08, 0.6 - 0.52 * min(1.0, (step - 60) / 15))
        score += rng.normal(0, 0.02)
        metrics = {
            "critic/score/mean": score, "critic/rewards/mean": score,
            "actor/entropy": max(0.05, 0.9 - 0.8 * max(0, step - 60) / 60 + rng.normal(0, 0.02)),
            "actor/kl_loss": 0.001 * step + abs(rng.normal(0, 0.002)),
            "actor/pg_loss": rng.normal(0, 0.01), "actor/pg_clipfrac": 0.002,
            "actor/grad_norm": 0.4 + abs(rng.normal(0, 0.05)), "actor/lr": 1e-6,
            "response_length/mean": 400 + rng.normal(0, 10),
            "response_length/clip_ratio": max(0.0, 0.02 + rng.normal(0, 0.005)),
            "timing_s/step": 30 + rng.normal(0, 1),
        }
        body = " - ".join(f"{k}:{_np(round(float(v), 6))}" for k, v in metrics.items())
        lines.append(f"{CYAN}(TaskRunner pid={PID}){RESET} step:{step} - {body}")
    return "\n".join(lines) + "\n"


def handwritten_stalled(steps: int = 150, seed: int = SEED) -> str:
    """A hand-written GRPO loop's prints: a reward that never moves."""
    rng = np.random.default_rng(seed)
    lines = ["Loading Qwen2.5-0.5B-Instruct ...", "lr=1e-6 group_size=8"]
    for step in range(1, steps + 1):
        lines.append(f"Step {step} | Reward: {0.3 + rng.normal(0, 0.02):.4f} | "
                     f"KL_ref: {0.01 + abs(rng.normal(0, 0.002)):.4f} | "
                     f"Loss: {rng.normal(0, 0.01):.4f}")
    return "\n".join(lines) + "\n"


def openrlhf_length(steps: int = 100, seed: int = SEED) -> str:
    """OpenRLHF rows as its wandb logger names them: length grows, reward does not."""
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(1, steps + 1):
        reward = 0.4 + rng.normal(0, 0.02)
        rows.append({"train/global_step": step, "train/reward": reward,
                     "train/return": reward - 0.01, "train/kl": 0.005 + abs(rng.normal(0, 0.001)),
                     "train/response_length": 200 + 600 * step / steps + rng.normal(0, 15),
                     "train/total_length": 400 + 600 * step / steps,
                     "train/policy_loss": rng.normal(0, 0.01), "train/actor_lr": 1e-6})
    return "\n".join(json.dumps(r) for r in rows) + "\n"


LOGS = {"verl_collapse.console.log": verl_collapse,
        "handwritten_stalled.log": handwritten_stalled,
        "openrlhf_length.jsonl": openrlhf_length}


def write_all(out: Path) -> dict[str, Path]:
    """Write every simulated log into ``out``; {file name: path}."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, make in LOGS.items():
        paths[name] = out / name
        paths[name].write_text(make())
    return paths


if __name__ == "__main__":
    for written in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "simulated-logs")).values():
        print(written)
