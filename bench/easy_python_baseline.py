"""How often SmolLM2-135M-Instruct solves builtin:easy-python before any training (not a test).

Samples completions as GRPO would (chat template, temperature 1.0) and scores them with the real
``unit_tests`` reward in the sandbox: the unit-test reward must not be 0 for every group at
step 0, or GRPO has no spread to learn from.
Usage (from the repository root): python -m bench.easy_python_baseline [--samples 4] [--tokens 128]
[--smoke]   (--smoke: the tiny random model on 2 problems, 2 samples of 8 tokens: the same path,
for tests/test_benches.py; its reward says nothing)
"""

from __future__ import annotations

import argparse
import time

import torch

from worker.rewards.code import run_unit_tests
from worker.training.code_datasets import easy_python_rows
from worker.training.models import load_model_and_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=4, help="completions per problem (G)")
    parser.add_argument("--tokens", type=int, default=128, help="max new tokens")
    parser.add_argument("--partial", action="store_true", help="score the share of asserts")
    parser.add_argument("--batch", type=int, default=80, help="sequences per generate call")
    parser.add_argument("--smoke", action="store_true", help="tiny model, 2 problems: seconds")
    args = parser.parse_args()
    torch.manual_seed(0)
    model_ref = "builtin:tiny-random" if args.smoke else "builtin:smollm2-135m-instruct"
    if args.smoke:
        args.samples, args.tokens = 2, 8
        print(f"smoke mode: {model_ref}, 2 problems (builtin:smollm2-135m-instruct skipped)")
    model, tok = load_model_and_tokenizer(model_ref)
    tok.padding_side = "left"
    rows = easy_python_rows()[:2 if args.smoke else None]
    texts, tests = [], []
    started = time.perf_counter()
    prompts = [tok.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
               for row in rows for _ in range(args.samples)]
    for i in range(0, len(prompts), args.batch):  # batched: one generate call per chunk
        enc = tok(prompts[i:i + args.batch], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**enc, do_sample=True, temperature=1.0,
                                 max_new_tokens=args.tokens, pad_token_id=tok.pad_token_id)
        texts += tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        print(f"generated {len(texts)}/{len(prompts)}", flush=True)
    tests = [row["tests"] for row in rows for _ in range(args.samples)]
    generated = time.perf_counter() - started
    outcomes, seconds = run_unit_tests(texts, tests, partial=args.partial)
    scores = [o.score or 0.0 for o in outcomes]
    groups = [scores[i:i + args.samples] for i in range(0, len(scores), args.samples)]
    reasons: dict[str, int] = {}
    for o in outcomes:
        key = (o.reason or "passed").split(":")[0]
        reasons[key] = reasons.get(key, 0) + 1
    print(f"{len(rows)} problems x {args.samples} samples, {args.tokens} tokens "
          f"(generation {generated:.0f}s, sandbox {sum(seconds) / len(seconds):.3f}s/program)")
    print(f"mean unit_tests reward {sum(scores) / len(scores):.3f}; "
          f"problems solved at least once {sum(max(g) == 1.0 for g in groups)}/{len(groups)}; "
          f"groups with spread {sum(max(g) != min(g) for g in groups)}/{len(groups)}")
    print("outcomes:", dict(sorted(reasons.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
