"""Speed of diagnostics on a 100k-step synthetic run: one-shot and incremental.

Usage: python bench/diagnostics_speed.py [N_STEPS] [--smoke]   (--smoke: 2,000 steps, the same
path; tests/test_benches.py runs it)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.diagnostics import DiagnosticsState, diagnose


def synthetic(n: int, seed: int = 0) -> list[tuple[int, dict]]:
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    t = steps / n
    cols = {
        "reward": 0.2 + 1.2 / (1 + np.exp(-(t - 0.3) * 10)) + rng.normal(0, 0.1, n),
        "rewards/format/mean": np.clip(1 / (1 + np.exp(-(t - 0.1) * 30)), 0, 1),
        "rewards/accuracy/mean": 0.2 + 0.6 * t + rng.normal(0, 0.05, n),
        "reward_std": 0.4 + rng.normal(0, 0.02, n),
        "frac_reward_zero_std": np.clip(0.3 + rng.normal(0, 0.05, n), 0, 1),
        "entropy": 0.8 - 0.2 * t + rng.normal(0, 0.02, n),
        "kl": 0.01 + 0.05 * t + np.abs(rng.normal(0, 0.005, n)),
        "completions/mean_length": 300 + rng.normal(0, 10, n),
        "completions/clipped_ratio": np.clip(0.02 + rng.normal(0, 0.01, n), 0, 1),
        "grad_norm": 0.5 + np.abs(rng.normal(0, 0.1, n)),
        "loss": rng.normal(0, 0.01, n),
        "learning_rate": np.full(n, 1e-6),
    }
    cols["kl"][[n // 5, n // 2]] = 50.0
    lists = {k: v.tolist() for k, v in cols.items()}
    return [(int(s), {k: lists[k][i] for k in lists}) for i, s in enumerate(steps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("steps", nargs="?", type=int, default=100_000)
    parser.add_argument("--smoke", action="store_true", help="2,000 steps: seconds")
    args = parser.parse_args()
    n = 2_000 if args.smoke else args.steps
    rows = synthetic(n)
    t0 = time.perf_counter()
    one = diagnose(rows)
    t_one = time.perf_counter() - t0
    print(f"one-shot diagnose of {n} steps: {t_one:.3f} s  -> {one.verdict} {one.categories}")

    st = DiagnosticsState.new()
    batch, costs = 10, []
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        t1 = time.perf_counter()
        inc = st.update(rows[i:i + batch])
        costs.append(time.perf_counter() - t1)
    total = time.perf_counter() - t0
    c = np.array(costs) * 1000
    print(f"incremental, {len(costs)} batches of {batch} rows: total {total:.2f} s; per batch "
          f"median {np.median(c):.2f} ms, p99 {np.percentile(c, 99):.2f} ms, max {c.max():.2f} ms"
          f" -> {inc.verdict} {inc.categories}")
    blob = json.dumps(st.to_json())
    t0 = time.perf_counter()
    for _ in range(20):
        DiagnosticsState.from_json(json.loads(json.dumps(st.to_json())))
    rt = (time.perf_counter() - t0) / 20 * 1000
    print(f"state JSON size {len(blob) / 1024:.1f} KiB; to_json+dumps+loads+from_json {rt:.2f} ms")
    print(f"same verdict/categories: {inc.verdict == one.verdict and inc.categories == one.categories}")


if __name__ == "__main__":
    main()
