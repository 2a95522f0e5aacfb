"""Synthetic GRPO runs for the diagnostics tests (numpy, fixed seeds)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rows_from(steps, **cols) -> list[tuple[int, dict]]:
    """Rows from equal-length columns; None entries are left out of the row."""
    out = []
    for i, s in enumerate(steps):
        d = {}
        for name, col in cols.items():
            v = col[i]
            if v is not None:
                d[name] = float(v) if not isinstance(v, str) else v
        out.append((int(s), d))
    return out


def healthy_cols(n_steps=300, every=1, seed=0):
    """Format reward rises early, accuracy later and slower; entropy slowly down; kl small."""
    rng = np.random.default_rng(seed)
    steps = np.arange(every, n_steps + 1, every)
    t = steps / n_steps
    k = len(steps)
    fmt = np.clip(sigmoid((t - 0.12) * 30) + rng.normal(0, 0.04, k), 0, 1)
    acc = np.clip(0.1 + 0.6 * sigmoid((t - 0.5) * 8) + rng.normal(0, 0.05, k), 0, 1)
    cols = {
        "rewards/format/mean": fmt, "rewards/accuracy/mean": acc, "reward": fmt + acc,
        "reward_std": 0.4 + rng.normal(0, 0.03, k),
        "frac_reward_zero_std": np.clip(0.3 + rng.normal(0, 0.08, k), 0, 1),
        "entropy": 0.9 - 0.2 * t + rng.normal(0, 0.03, k),
        "kl": 0.002 + 0.04 * t + np.abs(rng.normal(0, 0.003, k)),
        "completions/mean_length": 300 - 40 * t + rng.normal(0, 12, k),
        "completions/clipped_ratio": np.clip(0.02 + rng.normal(0, 0.01, k), 0, 1),
        "grad_norm": 0.5 + np.abs(rng.normal(0, 0.1, k)),
        "loss": rng.normal(0, 0.005, k),
        "learning_rate": np.full(k, 1e-6),
    }
    return steps, cols


def healthy_rows(n_steps=300, every=1, seed=0, **overrides):
    steps, cols = healthy_cols(n_steps, every, seed)
    cols.update(overrides)
    return rows_from(steps, **cols)


@pytest.fixture
def b():
    """Builders: ``b.healthy_cols``, ``b.healthy_rows``, ``b.rows_from``, ``b.rng(seed)``."""
    return SimpleNamespace(healthy_cols=healthy_cols, healthy_rows=healthy_rows,
                           rows_from=rows_from, sigmoid=sigmoid,
                           rng=lambda seed=0: np.random.default_rng(seed))
