"""SIMULATED training logs in other trainers' shapes (verl, a hand-written loop, OpenRLHF).

These are not real runs: each is drawn from a documented model (numpy, fixed seed, so the same
bytes every time) to exercise the readers and the diagnosis of logs the Deck did not write.
The real logs in /work/shared/data/real-grpo-logs are never copied into the repository.

  verl_collapse.console.log   verl's console lines (``step:N - key:value - ...``) as Ray prints
      them (``(TaskRunner pid=...)`` prefix, ANSI colours, numpy-2 ``np.float64(...)`` values):
      the task score rises 0.2 -> 0.6 over 60 steps, then falls to ~0.08 by step 75 and stays
      there (a reward collapse); entropy, KL loss, response length move with it.
  handwritten_stalled.log     a hand-written loop's ``Step N | Reward: .. | KL_ref: .. | Loss:
      ..`` lines (spellings the ``loop`` vocabulary reads): the reward stays flat at ~0.3 for
      150 steps (a stall). ``handwritten_stalled(keys=ODD_KEYS)`` spells them ``Score``,
      ``Div``, ``Obj``: read only with ``--map Score=reward --map Div=kl --map Obj=loss``.
  openrlhf_length.jsonl       OpenRLHF's wandb-style rows (``train/global_step``,
      ``train/reward``, ``train/kl``, ``train/response_length``, ``train/policy_loss``,
      ``train/return``): the response length grows 200 -> ~800 tokens while the reward stays
      flat (length growth without reward gain).

TRL-shaped logs (``trainer_state.json``: ``{"global_step", "log_history": [...]}``) in the shapes
issue 23 found misread; each names the reading a person makes of its chart:

  trl_smoke_constant.trainer_state.json   a 5-step smoke run with a constant reward: reward 0,
      reward_std 0, frac_reward_zero_std 1.0 on every row (zero spread, critical, at once).
  trl_old_zero_std.trainer_state.json     old TRL keys (no frac_reward_zero_std): reward_std is
      exactly 0 on 3 steps in 4, grad_norm ~0.001 on those and ~0.5 on the steps with spread
      (zero spread; the grad-norm "spikes" are the only real updates, not instability).
  trl_climb_plateau.trainer_state.json    the reward climbs -10 -> 0 until step 60, then stays
      flat (noise 0.3) to step 1000 (a stall from about step 60, not from step 10).
  trl_pinned_cap.trainer_state.json       completions at the 256-token cap from step 1
      (clipped_ratio ~0.9, mean length ~250, never grew) while the reward slowly rises
      (truncation, not a length explosion).
  trl_collapse_from_peak.trainer_state.json  the reward climbs 0.1 -> 1.1 over 400 steps, then
      falls to ~0.25 by step 700 and stays while completions grow 300 -> 800 (a collapse from
      its peak at ~400, not a stall).
  trl_component_hacking.trainer_state.json   two neutrally named components, no weight-0
      objective: 'style' rises 0.2 -> 0.8 from step 200 while 'judge' falls 0.7 -> 0.25, the
      total about flat (reward hacking).

Usage: python bench/simulated_logs.py OUT_DIR [--smoke]   (writes every file, prints their
paths; --smoke writes them to a temporary folder: tests/test_benches.py runs it)
"""

from __future__ import annotations

import argparse
import json
import tempfile
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


HAND_KEYS = ("Reward", "KL_ref", "Loss")  # spellings the loop vocabulary knows
ODD_KEYS = ("Score", "Div", "Obj")  # spellings nobody could guess: read only with --map


def handwritten_stalled(steps: int = 150, seed: int = SEED,
                        keys: tuple[str, str, str] = HAND_KEYS) -> str:
    """A hand-written GRPO loop's prints: a reward that never moves (``keys``: how the loop
    spells reward, KL and loss)."""
    rng = np.random.default_rng(seed)
    reward, kl, loss = keys
    lines = ["Loading Qwen2.5-0.5B-Instruct ...", "lr=1e-6 group_size=8"]
    for step in range(1, steps + 1):
        lines.append(f"Step {step} | {reward}: {0.3 + rng.normal(0, 0.02):.4f} | "
                     f"{kl}: {0.01 + abs(rng.normal(0, 0.002)):.4f} | "
                     f"{loss}: {rng.normal(0, 0.01):.4f}")
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


def _trl_state(rows: list[dict]) -> str:
    """A trainer_state.json as TRL writes it: rows rounded like its logs."""
    history = [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()}
               for r in rows]
    return json.dumps({"global_step": rows[-1]["step"], "log_history": history}, indent=1)


def trl_smoke_constant(steps: int = 5) -> str:
    """A smoke run whose reward function returns the same value for every completion."""
    return _trl_state([{"step": s, "loss": 0.0, "grad_norm": 0.0, "reward": 0.0,
                        "reward_std": 0.0, "frac_reward_zero_std": 1.0, "kl": 0.0,
                        "rewards/constant/mean": 0.0, "completions/mean_length": 16.0,
                        "learning_rate": 1e-6} for s in range(1, steps + 1)])


def trl_old_zero_std(steps: int = 120, seed: int = SEED) -> str:
    """Old TRL keys; groups have spread on one step in four, the gradient only there."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, steps + 1):
        spread = s % 4 == 1
        rows.append({"step": s, "loss": 0.0, "reward": 0.9 if spread else 1.0,
                     "reward_std": 0.2 + abs(rng.normal(0, 0.02)) if spread else 0.0,
                     "grad_norm": 0.5 + abs(rng.normal(0, 0.05)) if spread
                     else 0.001 + abs(rng.normal(0, 0.0002)),
                     "kl": 0.01, "completion_length": 180 + rng.normal(0, 5),
                     "rewards/correctness_reward_func": 0.9 if spread else 1.0})
    return _trl_state(rows)


def trl_climb_plateau(steps: int = 1000, every: int = 10, seed: int = SEED) -> str:
    """Reward climbs from -10 to 0 by step 60, then a long plateau."""
    rng = np.random.default_rng(seed)
    return _trl_state([{"step": s, "loss": 0.0, "reward": -10 + 10 * min(s, 60) / 60
                        + rng.normal(0, 0.3), "reward_std": 0.5, "frac_reward_zero_std": 0.1,
                        "kl": 0.02} for s in range(every, steps + 1, every)])


def trl_pinned_cap(steps: int = 200, seed: int = SEED) -> str:
    """Completions cut at the 256-token cap from the first step; length never grows."""
    rng = np.random.default_rng(seed)
    return _trl_state([{"step": s, "loss": 0.0, "reward": 0.2 + s / 1000 + rng.normal(0, 0.03),
                        "reward_std": 0.3, "frac_reward_zero_std": 0.1, "kl": 0.02,
                        "completions/mean_length": 250 + rng.normal(0, 3),
                        "completions/clipped_ratio": min(1.0, 0.9 + rng.normal(0, 0.03))}
                       for s in range(1, steps + 1)])


def trl_collapse_from_peak(steps: int = 800, every: int = 5, seed: int = SEED) -> str:
    """A long climb to a peak at step 400, then most of the gain lost while length grows."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(every, steps + 1, every):
        level = 0.1 + s / 400 if s <= 400 else 1.1 - 0.85 * min(1.0, (s - 400) / 300)
        rows.append({"step": s, "loss": 0.0, "reward": level + rng.normal(0, 0.08),
                     "reward_std": 0.4, "frac_reward_zero_std": 0.1, "kl": 0.05,
                     "completions/mean_length": (300.0 if s <= 400 else 300 + 500 * (s - 400)
                                                 / 400) + rng.normal(0, 8)})
    return _trl_state(rows)


def trl_component_hacking(steps: int = 400, seed: int = SEED) -> str:
    """'style' rises while 'judge' falls from mid-run; nothing says which is the objective."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, steps + 1):
        t = min(1.0, max(0.0, (s / steps - 0.5) / 0.5))
        style, judge = 0.2 + 0.6 * t + rng.normal(0, 0.03), 0.7 - 0.45 * t + rng.normal(0, 0.03)
        rows.append({"step": s, "loss": 0.0, "reward": style + judge, "reward_std": 0.3,
                     "frac_reward_zero_std": 0.1, "rewards/style/mean": style,
                     "rewards/judge/mean": judge})
    return _trl_state(rows)


LOGS = {"verl_collapse.console.log": verl_collapse,
        "handwritten_stalled.log": handwritten_stalled,
        "openrlhf_length.jsonl": openrlhf_length,
        "trl_smoke_constant.trainer_state.json": trl_smoke_constant,
        "trl_old_zero_std.trainer_state.json": trl_old_zero_std,
        "trl_climb_plateau.trainer_state.json": trl_climb_plateau,
        "trl_pinned_cap.trainer_state.json": trl_pinned_cap,
        "trl_collapse_from_peak.trainer_state.json": trl_collapse_from_peak,
        "trl_component_hacking.trainer_state.json": trl_component_hacking}


def write_all(out: Path) -> dict[str, Path]:
    """Write every simulated log into ``out``; {file name: path}."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, make in LOGS.items():
        paths[name] = out / name
        paths[name].write_text(make())
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=Path("simulated-logs"))
    parser.add_argument("--smoke", action="store_true",
                        help="write them to a temporary folder, removed afterwards")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        written = write_all(Path(tmp) if args.smoke else args.out)
        for path in written.values():
            print(path)
        print(f"{len(written)} simulated logs written")


if __name__ == "__main__":
    main()
