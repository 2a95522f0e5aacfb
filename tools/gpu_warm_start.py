"""GPU check of warm starts: forked training children train on CUDA.

Run on a machine with a CUDA GPU: ``python tools/gpu_warm_start.py`` from the repository root
(with the project installed, or its dependencies on PYTHONPATH; the figures go to stdout and
``$OUT/results.json``). Why a script and not a test: CI has no GPU, and the one thing a fork
can break there (a parent that initialised CUDA hands its children a driver they cannot use)
only shows on one. Seen on an NVIDIA H200, 2026-12-04: every child logged ``cuda: NVIDIA H200``
and nvidia-smi listed its pid; docs/deploying.md ("Warm starts") has the figures.

A real stack (uvicorn, a Celery prefork worker with one pool process, SQLite and the embedded
broker) trains three tiny runs: two on a worker with warm starts (the default: the pool process
imports the training stack and forks each run's child) and one on a worker with
GRPODECK_WARM_START=false (a fresh interpreter per run). For each: status, the device the child
logged, whether nvidia-smi saw the child's pid on the GPU, seconds from launch to the first
step and to the end."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout: tests.stack starts the stack
sys.path.insert(0, str(ROOT))
from tests.stack import Stack

OUT = Path(os.environ.get("OUT", "/tmp/out"))
SPEC = {"model": "builtin:tiny-random", "dataset": "builtin:short-prompts", "num_generations": 8,
        "max_completion_length": 32, "logging_steps": 1, "max_steps": 40,
        "rewards": [{"name": "length_target", "params": {"target": 20}}]}


def gpu_pids() -> set[int]:
    try:
        done = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                              capture_output=True, text=True, check=False)
    except OSError:
        return set()
    return {int(x) for x in re.findall(r"\d+", done.stdout)}


def one_run(stack: Stack, name: str) -> dict[str, object]:
    start = time.monotonic()
    run_id = stack.launch(name=name, **SPEC)
    first = None
    child_pid = None
    on_gpu = False
    while time.monotonic() - start < 240:
        run = stack.run(run_id)
        if first is None and run["step"] >= 1:
            first = time.monotonic() - start
        child = stack.training_child(run_id)
        if child is not None:
            child_pid = child.pid
            on_gpu = on_gpu or child.pid in gpu_pids()
        if run["status"] in {"succeeded", "failed", "cancelled", "lost"}:
            break
        time.sleep(0.2)
    total = time.monotonic() - start
    err = (stack.workdir / "runs" / str(run_id) / "stderr.log").read_text(errors="replace")
    device = re.findall(r"\((cuda[^)]*\)|cpu[^)]*)\)", err)
    return {"run": run_id, "status": run["status"], "steps": run["step"],
            "device": device[:1], "child_pid": child_pid, "child_seen_on_gpu": on_gpu,
            "first_step_s": round(first, 2) if first else None, "total_s": round(total, 2),
            "s_per_step": run.get("seconds_per_step"),
            "stderr_tail": err[-1500:] if run["status"] != "succeeded" else ""}


def main() -> None:
    results: dict[str, object] = {}
    for warm in (True, False):
        work = Path(tempfile.mkdtemp(prefix=f"gd-{'warm' if warm else 'cold'}-"))
        stack = Stack(database_url=f"sqlite:///{work / 'g.db'}",
                      broker_url=f"sqla+sqlite:///{work / 'broker.db'}", workdir=work,
                      extra_env={"GRPODECK_WARM_START": str(warm).lower()})
        try:
            stack.start()
            for i in range(2 if warm else 1):
                key = f"{'warm' if warm else 'cold'}-{i + 1}"
                results[key] = one_run(stack, key)
                print(key, json.dumps(results[key]), flush=True)
            log = stack.log("worker")
            results[f"{'warm' if warm else 'cold'}-worker-log-lines"] = [
                line for line in log.splitlines() if "training stack" in line or "ERROR" in line][:10]
        finally:
            stack.stop()
            (OUT / f"worker-{'warm' if warm else 'cold'}.log").write_text(stack.log("worker"))
            (OUT / f"web-{'warm' if warm else 'cold'}.log").write_text(stack.log("web"))
    print(json.dumps(results, indent=1))
    (OUT / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
