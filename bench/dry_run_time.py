"""Time a dry run on each built-in model (the closing note of issue 13 asks for it), and what a
person waits for one through a real worker, warm and cold.

Usage: python bench/dry_run_time.py [PROMPTS] [--through N] [--smoke]   (default 4 prompts;
--smoke: 1 prompt, one attempt, the tiny model only, 2 dry runs through a warm worker and the
cold worker left out: tests/test_benches.py runs it).

In this process: the worker's dry run (what its child does: load the model, sample
num_generations=4 completions of 32 tokens per prompt, score them) on builtin:short-prompts with
a length reward, twice per model: the first run may build the built-in into its cache, the
second is the usual case.

Through a worker (``--through N`` dry runs, default 5): a real web app and Celery worker
(tests/integration/conftest.py ``live_stack``, embedded defaults), each dry run posted to
``/api/dry-runs`` and polled until answered, on the tiny model. Warm: the pool process forks
the sampling child (``worker.dry_run``); its first dry run imports the training stack. Cold:
``GRPODECK_WARM_START=false``, a fresh interpreter for every dry run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import tiny_spec
from tests.integration.conftest import live_stack
from worker.dry_run import dry_run

MODELS = ("builtin:tiny-random", "builtin:smollm2-135m-instruct")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompts", nargs="?", type=int, default=4)
    parser.add_argument("--through", type=int, default=5, help="dry runs through each worker")
    parser.add_argument("--smoke", action="store_true", help="1 prompt, the tiny model, once")
    args = parser.parse_args()
    prompts = 1 if args.smoke else args.prompts
    models, attempts = (MODELS[:1], (1,)) if args.smoke else (MODELS, (1, 2))
    print(f"dry run: {prompts} prompts x 4 completions of <= 32 tokens, seconds")
    if args.smoke:
        print(f"smoke mode: {', '.join(MODELS[1:])} skipped, one attempt")
    print(f"{'model':34s}{'run':>5s}{'load':>8s}{'sample':>8s}{'score':>8s}{'total':>8s}")
    for model in models:
        spec = {"model": model, "dataset": "builtin:short-prompts", "num_generations": 4,
                "max_completion_length": 32,
                "rewards": [{"name": "length_target", "params": {"target": 20}}]}
        for attempt in attempts:
            result = dry_run(spec, prompts)
            if result.get("error"):
                print(f"{model}: {result['error']}")
                return 1
            t = result["timings"]
            print(f"{model:34s}{attempt:5d}{t['load']:8.1f}{t['sample']:8.1f}"
                  f"{t['score']:8.3f}{t['total']:8.1f}")
    through(2 if args.smoke else args.through, prompts, cold=not args.smoke)
    return 0


def through(count: int, prompts: int, cold: bool) -> None:
    """Launch-to-answer seconds of ``count`` dry runs through a warm worker and, with ``cold``,
    through one that starts a fresh interpreter for each."""
    print(f"through a worker: {count} dry runs of {prompts} prompt(s) each, launch to answer, "
          f"seconds (load {os.getloadavg()[0]:.1f})")
    kinds = {"warm": {}, "cold": {"GRPODECK_WARM_START": "false"}}
    if not cold:
        print("smoke mode: the cold worker left out")
        del kinds["cold"]
    seconds: dict[str, list[float]] = {}
    for kind, env in kinds.items():
        with tempfile.TemporaryDirectory(prefix=f"bench-dry-{kind}-") as tmp, \
                live_stack("embedded", Path(tmp), env) as stack:
            seconds[kind] = [answered(stack.url, prompts, i) for i in range(count)]
        print(f"  {kind}: {' '.join(f'{s:.2f}' for s in seconds[kind])}")
    later = statistics.median(seconds["warm"][1:])
    print(f"  warm: first {seconds['warm'][0]:.2f} s (the training stack imported), later "
          f"median {later:.2f} s")
    if "cold" in seconds:
        print(f"  cold: median {statistics.median(seconds['cold']):.2f} s; a warm dry run is "
              f"{statistics.median(seconds['cold']) / later:.1f}x faster")


def answered(url: str, prompts: int, index: int, timeout_s: float = 300.0) -> float:
    """Seconds from posting a dry run until the worker's answer is recorded."""
    start = time.perf_counter()
    reply = httpx.post(f"{url}/api/dry-runs", params={"prompts": prompts}, timeout=30,
                       json=tiny_spec(name=f"bench-dry-{index}"))
    reply.raise_for_status()
    status = f"{url}/api/dry-runs/{reply.json()['id']}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = httpx.get(status, timeout=30).json()
        if body["status"] != "queued":
            if body["status"] != "done":
                raise RuntimeError(f"dry run {index}: {body['status']}: {body.get('error')}")
            return time.perf_counter() - start
        time.sleep(0.05)  # polling the recorded state, bounded by the deadline
    raise RuntimeError(f"dry run {index} not answered within {timeout_s} s")


if __name__ == "__main__":
    sys.exit(main())
