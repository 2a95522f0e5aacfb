"""The MLflow client's own logging loop against GRPO Deck's ``/mlflow`` and against MLflow's
own tracking server, in the same run.

Usage: python bench/mlflow_compat.py [--steps 300] [--repeats 3] [--smoke]
(--smoke: 10 steps, one repeat, both servers: the same path, for tests/test_benches.py)

Each contender runs the same script with ``mlflow==3.17.2``: ``set_experiment``,
``start_run``, ``log_params`` (40 params), then one synchronous ``log_metrics(25 metrics,
step=)`` per step (what a training loop without async logging does), then ``end_run``; timed
from ``set_experiment`` to ``end_run``. Servers:

- GRPO Deck: ``grpodeck serve`` on a fresh migrated SQLite database (bench/ingest.py's
  ``DeckServer``), development mode; every batch goes through the ingest pipeline and the
  diagnostics, committed before the reply.
- MLflow: ``mlflow server --backend-store-uri sqlite:///...`` (``--workers 1``), what a user
  who wanted MLflow would run.

Repeats are interleaved; medians, steps/s and the Deck/MLflow ratio are printed. Figures, not
a test: tests/client/test_mlflow_live.py checks what arrives.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import DeckServer, rows
from bench.load import _free_port


@contextlib.contextmanager
def mlflow_server() -> Iterator[str]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-mlflow-server-"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp / "server.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
             f"sqlite:///{tmp / 'mlflow.db'}", "--default-artifact-root", str(tmp / "art"),
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=tmp, stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(1200):
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"mlflow server did not start; see {tmp / 'server.log'}")
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def client_run(tracking_uri: str, data: list[dict[str, float]]) -> float:
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    params = {f"param_{i}": i / 7 for i in range(40)}
    start = time.perf_counter()
    mlflow.set_experiment(f"bench-{uuid.uuid4().hex[:6]}")
    with mlflow.start_run(run_name="bench"):
        mlflow.log_params(params)
        for step, metrics in enumerate(data, 1):
            mlflow.log_metrics(metrics, step=step)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="10 steps, one repeat")
    a = parser.parse_args()
    if a.smoke:
        a.steps, a.repeats = 10, 1
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    data = rows(a.steps)
    times: dict[str, list[float]] = {"GRPO Deck /mlflow": [], "MLflow server": []}
    with DeckServer("sqlite") as deck, mlflow_server() as mlflow_url:
        # One whole untimed run each first: the first long run after start was several times
        # slower than the rest (11 s and 26 s against 2-3 s, with only 5 warm-up steps); where
        # that comes from is not known (the same loop in-process, TestClient, does not show it).
        client_run(f"{deck.url}/mlflow", data)
        client_run(mlflow_url, data)
        for _ in range(a.repeats):
            times["GRPO Deck /mlflow"].append(client_run(f"{deck.url}/mlflow", data))
            times["MLflow server"].append(client_run(mlflow_url, data))
    med = {name: statistics.median(t) for name, t in times.items()}
    points = a.steps * len(data[0])
    print(f"{a.steps} steps x {len(data[0])} metrics, one log_metrics per step, "
          f"median of {a.repeats}")
    for name, seconds in med.items():
        print(f"  {name:18s} {seconds:7.2f} s  {a.steps / seconds:7.1f} steps/s  "
              f"{points / seconds:8.0f} points/s   runs: "
              + ", ".join(f"{t:.2f}" for t in times[name]))
    ratio = med["MLflow server"] / med["GRPO Deck /mlflow"]
    print(f"  GRPO Deck is {ratio:.2f}x the MLflow server's speed "
          f"({'faster' if ratio > 1 else 'slower'}; {math.fabs(1 - ratio):.0%})")


if __name__ == "__main__":
    main()
