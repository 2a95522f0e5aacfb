"""Train small runs that fail on purpose with the real worker, and save their logs as fixtures.

Usage: python bench/failing_runs.py [NAME ...] [--smoke]   (CPU, tiny built-in model, about a
minute; --smoke: one run of 3 steps written to a temporary folder, never over the fixtures:
tests/test_benches.py runs it)

Each run is the real ``worker.training.child.train`` on ``builtin:tiny-random``, reporting to a
local receiver that accepts everything; the worker's own spool (every row exactly as sent) is
saved as ``tests/diagnostics/fixtures/failing_runs/<name>.jsonl`` (first line: the spec and the
finding the run must raise). ``tests/diagnostics/test_trained_failures.py`` diagnoses each.
Regenerating them is this one command; review the diff like code.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worker.training.child import train

OUT = ROOT / "tests" / "diagnostics" / "fixtures" / "failing_runs"
BASE = {"model": "builtin:tiny-random", "dataset": "builtin:short-prompts", "num_generations": 4,
        "max_completion_length": 16, "logging_steps": 1, "max_steps": 40}

# name -> (spec overrides, [(category, minimum severity)] the run must raise, why)
FAILURES = {
    "constant_reward": (
        {"max_steps": 60, "rewards": [{"name": "constant", "params": {"value": 0.0}}]},
        [("zero_reward_spread", "critical"), ("stalled", "warning")],
        "every completion scores 0: no group has spread, the reward never moves"),
    "impossible_reward": (
        {"dataset": "builtin:arithmetic", "rewards": [{"name": "exact_answer"}]},
        [("zero_reward_spread", "critical")],
        "a random model never gets the number right: all groups fail"),
    "short_completions": (
        {"max_completion_length": 4,
         "rewards": [{"name": "length_target", "params": {"target": 20}}]},
        [("truncation", "critical")],
        "max_completion_length 4: every completion is cut off"),
    "learning_rate_too_high": (
        {"learning_rate": 0.5, "beta": 0.04,
         "rewards": [{"name": "length_target", "params": {"target": 20}}]},
        [("entropy_collapse", "critical"), ("kl_blowup", "warning")],
        "learning rate 0.5: entropy falls to 0 within a few steps, KL jumps to ~4 and stays"),
}


class _Accept(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        payload = json.dumps({"accepted": len(body.get("rows", [])), "stop": False}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


def run_one(name: str, url: str, out: Path = OUT, max_steps: int | None = None) -> Path:
    overrides, expect, why = FAILURES[name]
    spec = {**BASE, **overrides, **({"max_steps": max_steps} if max_steps else {})}
    with tempfile.TemporaryDirectory() as tmp:
        train(spec, name, url, "bench", tmp, batch_rows=50)
        rows = (Path(tmp) / "metrics.jsonl").read_text().splitlines()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.jsonl"
    head = {"spec": spec, "expect": [list(e) for e in expect], "why": why}
    path.write_text("\n".join([json.dumps(head, sort_keys=True), *rows]) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(FAILURES))
    parser.add_argument("--smoke", action="store_true",
                        help="short_completions, 3 steps, into a temporary folder")
    args = parser.parse_args()
    if unknown := set(args.names) - set(FAILURES):
        parser.error(f"unknown runs {sorted(unknown)}; known: {', '.join(FAILURES)}")
    names = ["short_completions"] if args.smoke else args.names or list(FAILURES)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accept)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out, steps = (Path(tmp), 3) if args.smoke else (OUT, None)
            for name in names:
                path = run_one(name, url, out, steps)
                rows = len(path.read_text().splitlines()) - 1
                print(f"{name}: {path} ({rows} rows)", flush=True)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
