"""Time a dry run on each built-in model (the closing note of issue 13 asks for it).

Usage: python bench/dry_run_time.py [PROMPTS] [--smoke]   (default 4; --smoke: 1 prompt, one
attempt, the tiny model only: tests/test_benches.py runs it). Runs the worker's dry run in this
process (what the worker's child does: load the model, sample num_generations=4 completions of
32 tokens per prompt, score them) on builtin:short-prompts with a length reward, twice per
model: the first run may build the built-in into its cache, the second is the usual case.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.dry_run import dry_run

MODELS = ("builtin:tiny-random", "builtin:smollm2-135m-instruct")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompts", nargs="?", type=int, default=4)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
