"""Cost of building a run page's charts for a long run (what a live poll pays).

Usage: python bench/run_page_load.py [N_STEPS] — fills a temporary SQLite database through the
real ingest path with N_STEPS steps x 20 metrics, then times the chart context build.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(n_steps: int) -> None:
    tmp = tempfile.mkdtemp()
    os.environ["GRPODECK_DATABASE_URL"] = f"sqlite:///{tmp}/bench.db"
    from tests.conftest import migrate

    migrate(os.environ["GRPODECK_DATABASE_URL"])
    import math

    from app.core.db import get_sessionmaker
    from app.metrics.ingest import ingest
    from app.runs import service
    from app.runs.views import _charts_context
    from grpodeck.contract.spec import RunSpec

    names = ["reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "loss", "grad_norm",
             "learning_rate", "completions/mean_length", "completions/min_length",
             "completions/max_length", "completions/clipped_ratio", "rewards/a/mean",
             "rewards/b/mean", "clip_ratio/region_mean", "clip_ratio/low_mean",
             "clip_ratio/high_mean", "completions/mean_terminated_length", "epoch", "step_time"]
    with get_sessionmaker()() as db:
        run, _ = service.create_run(db, spec=RunSpec(max_steps=n_steps))
        t = time.perf_counter()
        for start in range(1, n_steps + 1, 1000):
            rows = [(s, {n: math.sin(s / 100 + i) for i, n in enumerate(names)})
                    for s in range(start, min(start + 1000, n_steps + 1))]
            ingest(db, run, rows)
        db.commit()
        print(f"ingest {n_steps} steps x {len(names)} metrics: {time.perf_counter() - t:.2f} s")
        for _ in range(2):
            t = time.perf_counter()
            ctx = _charts_context(db, run, [])
            print(f"chart context: {time.perf_counter() - t:.3f} s, {len(ctx['charts'])} charts")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
