"""``bench/gpu_check.py --scaling N``: steps/s of one GRPO training with 1 and N processes, bare
(``accelerate launch`` of ``bench/scaling_train.py``) and through GRPO Deck (the worker's own
training child, with the spec's ``num_processes``: one process is ``python -m
worker.training.child``, N is the command the worker builds, ``worker.training.multi``).

Both sides read the trainer's own end-of-training summary (``train_steps_per_second``: the same
clock for both, warm-up included), each started as a separate process group with a time limit.
A side that cannot run says why (the Deck's N-process launch comes with the ``num_processes``
field of the run spec: on a checkout without it the line says so); nothing is made up.

Usage: python bench/scaling.py N [--cpu] [--smoke] ...   (the same as ``bench/gpu_check.py
--scaling N ...``; --smoke: the tiny model, 2 steps, on the CPU: tests/test_benches.py runs
it with N = 1, each side once, as the N-process launch took minutes on a loaded 2-core machine)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BARE_SCRIPT = ROOT / "bench" / "scaling_train.py"
PREFIX = "SCALING "


@dataclass
class Side:
    """One measured configuration: steps/s, or the reason it did not run."""

    name: str
    processes: int
    steps_per_second: float | None = None
    why_not: str | None = None


def device() -> str:
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return f"cuda: {props.name}, {props.total_memory / 2**30:.0f} GiB"
    return f"cpu: {torch.get_num_threads()} threads"


def spec_for(model: str, steps: int, length: int) -> dict[str, Any]:
    return {"name": "gpu-check", "model": model, "dataset": "builtin:short-prompts",
            "num_generations": 8, "max_steps": steps, "max_completion_length": length,
            "logging_steps": 1, "rewards": [{"name": "length_target", "params": {"target": 20}}]}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(cpu: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "clients" / "python"), os.environ.get("PYTHONPATH", "")])}
    if cpu:  # both sides on the CPU, whatever the machine has; one core per process, so
        # "N processes" is N cores against one (as N GPUs against one), not oversubscription
        env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    return env


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def bare(spec: dict[str, Any], processes: int, cpu: bool, timeout: float) -> Side:
    side = Side("bare accelerate launch", processes)
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes",
                   str(processes), "--num_machines", "1", "--mixed_precision", "no",
                   "--dynamo_backend", "no", "--main_process_port", str(_port()),
                   *(["--cpu"] if cpu else []), str(BARE_SCRIPT), "--spec", str(spec_path)]
        try:
            done = subprocess.run(command, env=_env(cpu), capture_output=True, text=True,
                                  timeout=timeout, cwd=tmp, check=False)
        except subprocess.TimeoutExpired:
            side.why_not = f"did not finish within {timeout:.0f} s"
            return side
    for line in done.stdout.splitlines():
        if line.startswith(PREFIX):
            side.steps_per_second = float(json.loads(line[len(PREFIX):])["train_steps_per_second"])
            return side
    side.why_not = f"exit {done.returncode}: {_tail(done.stderr)}"
    return side


def _deck_command(spec: dict[str, Any], out: Path, child: list[str],
                  processes: int) -> list[str] | str:
    """The worker's command for this spec, or why this checkout cannot start it."""
    if processes == 1:
        return child
    try:
        from worker.training.multi import multi_process_command  # type: ignore[import-not-found]
    except ImportError as exc:
        return f"the worker has no multi-process launch here ({exc})"
    with (out / "stdout.log").open("ab") as stdout:
        try:
            return list(multi_process_command(spec, out, child, stdout))
        except ValueError as exc:  # the worker would refuse this run on its devices
            return f"the worker refuses it: {exc}"


def deck(spec: dict[str, Any], processes: int, cpu: bool, timeout: float) -> Side:
    from bench.ingest import DeckServer
    from grpodeck.contract.spec import RunSpec
    from worker.training.child import TOKEN_ENV

    side = Side("through GRPO Deck", processes)
    if processes > 1 and "num_processes" not in RunSpec.model_fields:
        side.why_not = ("this checkout's run spec has no num_processes field (the multi-process "
                        "launch of issue 26, branch multidev, is not merged here)")
        return side
    spec = {**spec, "num_processes": processes} if processes > 1 else spec
    if cpu:  # the worker's device probe (a child of this process) must see the CPU only too
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    with DeckServer("sqlite") as server, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        try:
            run_id, token = server.new_run(spec)
        except ValueError as exc:  # e.g. more processes than this machine has devices
            side.why_not = f"the run spec refuses it: {' '.join(str(exc).split())[:300]}"
            return side
        (out / "spec.json").write_text(json.dumps(spec))
        child = [sys.executable, "-m", "worker.training.child", "--spec", str(out / "spec.json"),
                 "--run-id", str(run_id), "--report-url", server.url, "--output-dir", str(out)]
        command = _deck_command(spec, out, child, processes)
        if isinstance(command, str):
            side.why_not = command
            return side
        try:
            done = subprocess.run(command, env={**_env(cpu), TOKEN_ENV: token}, timeout=timeout,
                                  capture_output=True, text=True, cwd=tmp,
                                  check=False)
        except subprocess.TimeoutExpired:
            side.why_not = f"did not finish within {timeout:.0f} s"
            return side
        spool = out / "metrics.jsonl"
        rows = [json.loads(x) for x in spool.read_text().splitlines()] if spool.exists() else []
        for row in rows:
            if "train_steps_per_second" in row.get("metrics", {}):
                side.steps_per_second = float(row["metrics"]["train_steps_per_second"])
                return side
        side.why_not = f"exit {done.returncode}, no training summary: {_tail(done.stderr)}"
    return side


def scaling(spec: dict[str, Any], processes: int, cpu: bool, timeout: float) -> list[Side]:
    """Bare and Deck, each with 1 and ``processes`` processes, printed as they finish."""
    sides = []
    for count in dict.fromkeys((1, processes)):  # N = 1 (--smoke): each side once
        for measure in (bare, deck):
            side = measure(spec, count, cpu, timeout)
            sides.append(side)
            got = (f"{side.steps_per_second:.3f} steps/s" if side.steps_per_second is not None
                   else f"NOT RUN: {side.why_not}")
            print(f"  {side.name:<24} {count} process(es): {got}", flush=True)
    return sides


def report(sides: list[Side], processes: int, per_step_prompts: int) -> dict[str, Any]:
    """The table and the ratios that could be computed; returns them for the JSON line."""
    rate = {(s.name, s.processes): s.steps_per_second for s in sides}
    print(f"{'':<26}{'1 proc':>10}{f'{processes} procs':>10}{'speed-up':>10}"
          f"{'scaling eff.':>14}")
    figures: dict[str, Any] = {}
    for name in ("bare accelerate launch", "through GRPO Deck"):
        one, many = rate.get((name, 1)), rate.get((name, processes))
        # each step of N processes trains N times the prompts: throughput speed-up = N x ratio
        speedup = processes * many / one if one and many else None
        cells = [f"{v:.3f}" if v else "n/a" for v in (one, many)]
        print(f"{name:<26}{cells[0]:>10}{cells[1]:>10}"
              f"{f'{speedup:.2f}x' if speedup else 'n/a':>10}"
              f"{f'{speedup / processes:.0%}' if speedup else 'n/a':>14}")
        figures[name] = {"steps_per_s_1": one, f"steps_per_s_{processes}": many,
                         "throughput_speedup": speedup}
    for count in dict.fromkeys((1, processes)):
        b, d = rate.get(("bare accelerate launch", count)), rate.get(("through GRPO Deck", count))
        if b and d:
            print(f"GRPO Deck vs bare at {count} process(es): {d / b:.3f} of bare steps/s "
                  f"(overhead {1 - d / b:+.1%})")
            figures[f"deck_over_bare_{count}"] = d / b
    print(f"(a step with N processes trains N x {per_step_prompts} completions: speed-up is "
          "throughput, N x the steps/s ratio)")
    return figures


def run_scaling(processes: int, cpu: bool, model: str | None, steps: int | None, length: int,
                side_seconds: float) -> None:
    """1 vs ``processes`` processes, bare and through the Deck: the table and a JSON line."""
    if cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    where = device()
    model = model or "builtin:tiny-random"
    steps = steps or (30 if where.startswith("cuda") else 6)
    spec = spec_for(model, steps, length)
    print(f"scaling on {where}; model {model}; {steps} steps, G=8, max_completion_length "
          f"{length}; 1 vs {processes} processes", flush=True)
    figures = report(scaling(spec, processes, cpu, side_seconds), processes,
                     spec["num_generations"])
    print(json.dumps({"device": where, "model": model, "steps": steps,
                      "processes": processes, **figures}))


def main(argv: list[str] | None = None) -> None:
    """The same options as ``bench/gpu_check.py --scaling N``, with N first."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("processes", type=int, metavar="N")
    parser.add_argument("--cpu", action="store_true", help="on the CPU")
    parser.add_argument("--model", default=None, help="default: the tiny random model")
    parser.add_argument("--steps", type=int, default=None, help="default 30 on GPU, 6 on CPU")
    parser.add_argument("--length", type=int, default=64, help="max_completion_length")
    parser.add_argument("--side-seconds", type=float, default=600.0,
                        help="time limit of each measured training")
    parser.add_argument("--smoke", action="store_true", help="tiny model, 2 steps, CPU")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.length, args.steps, args.cpu = "builtin:tiny-random", 8, 2, True
    run_scaling(args.processes, args.cpu, args.model, args.steps, args.length,
                args.side_seconds)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
