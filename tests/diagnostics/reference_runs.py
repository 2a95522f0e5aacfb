"""Reference runs for the diagnostics: one synthetic run per pattern (the shapes of
test_patterns.py, fixed seeds), and their stored diagnoses in golden/reference_findings.json.

Why a stored diagnosis: the pattern tests check the category and severity; a changed
threshold, evidence value, step range or summary would pass them unnoticed. The stored file
is the reviewed expectation. After an intended change to a detector, regenerate it and review
the diff like code:

    .venv/bin/python -m tests.diagnostics.reference_runs --update
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from app.diagnostics import RunContext, diagnose
from tests.diagnostics.conftest import healthy_cols, rows_from

GOLDEN = Path(__file__).parent / "golden" / "reference_findings.json"
REP, IDENT, EMPTY = "rollouts/repetition", "rollouts/identical_group_frac", "rollouts/empty_frac"

Run = tuple[list[tuple[int, dict]], RunContext | None]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def healthy() -> Run:
    steps, c = healthy_cols(300, 1)
    return rows_from(steps, **c), None


def too_easy() -> Run:
    steps, c = healthy_cols(200, 5)
    r = rng(1)
    c["frac_reward_zero_std"] = np.clip(0.9 + r.normal(0, 0.04, len(steps)), 0, 1)
    c["reward"] = np.clip(0.92 + r.normal(0, 0.03, len(steps)), 0, 1)
    return rows_from(steps, **c), None


def too_hard() -> Run:
    steps, c = healthy_cols(200, 1)
    r = rng(2)
    c["frac_reward_zero_std"] = np.clip(0.97 + r.normal(0, 0.01, len(steps)), 0, 1)
    c["reward"] = np.clip(0.03 + r.normal(0, 0.01, len(steps)), 0, 1)
    return rows_from(steps, **c), None


def zero_spread_mixed() -> Run:
    """Zero spread with the reward mid-range: some groups all pass, some all fail."""
    steps, c = healthy_cols(200, 2)
    r = rng(21)
    c["frac_reward_zero_std"] = np.clip(0.85 + r.normal(0, 0.02, len(steps)), 0, 1)
    c["reward"] = np.clip(0.5 + r.normal(0, 0.05, len(steps)), 0, 1)
    return rows_from(steps, **c), None


def zero_spread_negative() -> Run:
    """Negative rewards are placed in their own observed range: near the bottom = all fail."""
    steps, c = healthy_cols(200, 1)
    r = rng(22)
    c["frac_reward_zero_std"] = np.clip(0.9 + r.normal(0, 0.02, len(steps)), 0, 1)
    c["reward"] = np.where(steps < 30, -0.2, -1.8) + r.normal(0, 0.05, len(steps))
    return rows_from(steps, **c), None


def stalled() -> Run:
    steps, c = healthy_cols(300, 1)
    c["reward"] = 0.5 + rng(3).normal(0, 0.2, len(steps))
    return rows_from(steps, **c), None


def stalled_sparse() -> Run:
    steps = np.arange(10, 501, 10)
    r = -3 * np.exp(-steps / 30) + rng(4).normal(0, 5, len(steps))
    return rows_from(steps, reward=r), None


def entropy_collapse() -> Run:
    steps, c = healthy_cols(300, 1)
    t = steps / 300
    c["entropy"] = np.where(t < 0.3, 0.9, 0.04) + rng(5).normal(0, 0.005, len(steps))
    return rows_from(steps, **c), None


def entropy_blowup() -> Run:
    steps, c = healthy_cols(300, 1)
    t = steps / 300
    c["entropy"] = 0.5 + 3.0 * np.clip((t - 0.3) * 3, 0, 1) + rng(6).normal(0, 0.05, len(steps))
    return rows_from(steps, **c), None


def kl_blowup() -> Run:
    steps, c = healthy_cols(400, 1)
    t = steps / 400
    c["kl"] = 0.01 * np.exp(7 * t) + np.abs(rng(7).normal(0, 0.005, len(steps)))
    return rows_from(steps, **c), RunContext(beta=0.04)


def kl_spikes() -> Run:
    steps, c = healthy_cols(400, 1)
    kl = c["kl"].copy()
    kl[[50, 150, 260, 350]] = 80.0
    return rows_from(steps, **{**c, "kl": kl}), None


def kl_single_spike() -> Run:
    steps, c = healthy_cols(400, 1)
    kl = c["kl"].copy()
    kl[200] = 150.0
    return rows_from(steps, **{**c, "kl": kl}), None


def kl_offset() -> Run:
    steps, c = healthy_cols(200, 1)
    c["kl"] = 1.0 + rng(8).normal(0, 0.15, len(steps))
    return rows_from(steps, **c), None


def kl_sudden_growth() -> Run:
    steps = np.arange(1, 201)
    kl = np.where(steps < 100, 0.02, 0.02 * np.exp((steps - 100) / 15))
    return rows_from(steps, kl=kl, reward=0.5 + 0.001 * steps, loss=np.full(200, 0.01)), None


def truncation() -> Run:
    steps, c = healthy_cols(200, 10)
    c["completions/clipped_ratio"] = np.clip(0.9 + rng(9).normal(0, 0.04, len(steps)), 0, 1)
    return rows_from(steps, **c), None


def length_to_cap() -> Run:
    steps, c = healthy_cols(300, 1)
    t = steps / 300
    c["completions/mean_length"] = 200 + 700 * t + rng(10).normal(0, 15, len(steps))
    c.pop("completions/clipped_ratio")
    return rows_from(steps, **c), RunContext(max_completion_length=1024)


def length_collapse() -> Run:
    steps, c = healthy_cols(300, 1)
    r = rng(11)
    t = steps / 300
    c["reward"] = 0.5 + r.normal(0, 0.1, len(steps))
    c["completions/mean_length"] = np.where(t < 0.4, 300, 6) + r.normal(0, 1, len(steps))
    return rows_from(steps, **c), None


def hacking() -> Run:
    steps, c = healthy_cols(300, 1)
    r = rng(13)
    t = steps / 300
    c["rewards/format/mean"] = 0.1 + 0.85 * t + r.normal(0, 0.04, len(steps))
    c["rewards/accuracy/mean"] = 0.6 - 0.4 * t + r.normal(0, 0.05, len(steps))
    c["reward"] = c["rewards/format/mean"] + c["rewards/accuracy/mean"]
    return rows_from(steps, **c), None


def divergence() -> Run:
    steps, c = healthy_cols(300, 1)
    ev = np.full(len(steps), None, dtype=object)
    idx = np.arange(19, 300, 20)
    ev[idx] = 0.8 - 0.5 * (steps[idx] / 300) + rng(14).normal(0, 0.03, len(idx))
    return rows_from(steps, **c, eval_reward=ev), None


def reward_collapse() -> Run:
    steps, c = healthy_cols(400, 1)
    t = steps / 400
    c["reward"] = (np.where(t < 0.6, 0.2 + 1.5 * t / 0.6, 0.3)
                   + rng(16).normal(0, 0.05, len(steps)))
    return rows_from(steps, **c), None


def nonfinite() -> Run:
    steps, c = healthy_cols(100, 1)
    loss, grad = list(c["loss"]), list(c["grad_norm"])
    loss[60] = float("nan")
    grad[70] = float("inf")
    kl = list(c["kl"])
    kl[80] = float("nan")
    return rows_from(steps, **{**c, "loss": loss, "grad_norm": grad, "kl": kl}), None


def grad_spikes() -> Run:
    steps, c = healthy_cols(300, 1)
    g = c["grad_norm"].copy()
    g[[40, 120, 200]] = 60.0
    return rows_from(steps, **{**c, "grad_norm": g}), None


def dead_component() -> Run:
    steps, c = healthy_cols(250, 10)
    c["rewards/strict_format/mean"] = np.zeros(len(steps))
    return rows_from(steps, **c), None


def _with_signals(rep, ident, empty) -> list[tuple[int, dict]]:
    steps, c = healthy_cols(300, 1)
    rows = rows_from(steps, **c)
    captured = [m for s, m in rows if s % 10 == 0]
    for m, r, i, e in zip(captured, rep, ident, empty, strict=True):
        m.update({REP: float(r), IDENT: float(i), EMPTY: float(e)})
    return rows


def degenerate() -> Run:
    r = rng(2)
    rep = np.clip(0.05 + r.normal(0, 0.03, 30), 0, 1)
    ident = r.choice([0.0, 0.25], 30)
    empty = np.clip(r.normal(0.01, 0.01, 30), 0, 1)
    rep[15:] = np.linspace(0.6, 0.9, 15)
    ident[20:] = 1.0
    empty[18:] = 0.5
    return _with_signals(rep, ident, empty), None


RUNS: dict[str, Callable[[], Run]] = {f.__name__: f for f in (
    healthy, too_easy, too_hard, zero_spread_mixed, zero_spread_negative, stalled, stalled_sparse, entropy_collapse, entropy_blowup,
    kl_blowup, kl_spikes, kl_single_spike, kl_offset, kl_sudden_growth, truncation,
    length_to_cap, length_collapse, hacking, divergence, reward_collapse, nonfinite,
    grad_spikes, dead_component, degenerate)}


def diagnosis_of(name: str) -> dict:
    """The reviewed part of a diagnosis: verdict and findings (coverage, what was read, has its
    own tests in tests/importers/test_other_trainers.py)."""
    rows, context = RUNS[name]()
    d = diagnose(rows, context).to_dict()
    return json.loads(json.dumps({k: d[k] for k in ("verdict", "findings")}, allow_nan=False))


def main() -> None:
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python -m tests.diagnostics.reference_runs --update")
    GOLDEN.write_text(json.dumps({n: diagnosis_of(n) for n in RUNS}, indent=1, sort_keys=True)
                      + "\n")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()
