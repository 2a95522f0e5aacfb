"""Fault drills: parts of a real stack die while tiny-random runs train; prints a table.

Usage: python bench/drills.py [DRILL ...] [--smoke]   (drills: web-mid web-end worker-kill broker
pg; --smoke: web-mid only, 10 steps, the web down 3 s: the same path, for tests/test_benches.py)

Each drill starts its own stack (uvicorn + a Celery worker, as a user starts them) on a private
PostgreSQL cluster (initdb/pg_ctl from /usr/lib/postgresql/*/bin, on a free port in a temp dir;
falls back to the shared server, without the PostgreSQL drill, when they are missing) and a
private redis-server with an append-only file (never the shared one on 6379). Then:

- web-mid:     the web app is killed for 30 s mid-run, then restarted on the same port and DB;
- web-end:     the web app is killed around the last steps and stays down 30 s after training ends;
- worker-kill: the Celery worker (main and pool processes) is kill -9-ed mid-run;
- broker:      Redis restarts while one run trains and two wait in the queue;
- pg:          the PostgreSQL cluster restarts mid-run.

For each: the run status expected and got, the steps the trainer logged and how many arrived,
duplicates (a step stored twice for one metric), pass/fail. After a worker kill the dying
child sends the steps it logged but had not delivered; any still missing are shown, not hidden.
Not a test (minutes of training); the key drills are tests in tests/integration/test_faults.py.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import psutil
import psycopg

from tests.stack import TERMINAL, PrivateRedis, Stack, free_port

ENV = {"GRPODECK_LOST_AFTER_SECONDS": "30", "GRPODECK_LOST_CHECK_SECONDS": "2",
       "GRPODECK_REPORT_DEADLINE_SECONDS": "300", "GRPODECK_BROKER_VISIBILITY_SECONDS": "60"}
TINY = {"model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "num_generations": 4, "max_completion_length": 8, "logging_steps": 1,
        "rewards": [{"name": "length_target", "params": {"target": 20}}]}
OUTAGE_S = 30


@dataclass
class Result:
    drill: str
    expected: str
    got: list[str] = field(default_factory=list)
    logged: int = 0
    arrived: int = 0
    duplicates: int = 0
    note: str = ""

    @property
    def passed(self) -> bool:
        return (all(g == self.expected for g in self.got) and bool(self.got)
                and self.duplicates == 0 and self.arrived == self.logged)


class PrivatePostgres:
    """A PostgreSQL cluster of our own, so the drill can restart it."""

    def __init__(self, workdir: Path) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        self.bin = Path(bins[-1]).parent if bins else None
        self.dir = workdir / "pg"
        self.port = free_port()

    @property
    def available(self) -> bool:
        return self.bin is not None

    def _run(self, *cmd: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *cmd], check=True, capture_output=True)

    def init(self) -> PrivatePostgres:
        self.dir.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            os.chmod(self.dir.parent, 0o755)
        self._run(str(self.bin / "initdb"), "-D", str(self.dir / "data"), "-A", "trust",
                  "-U", "postgres")
        self.start()
        return self

    def start(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-w", "-l",
                  str(self.dir / "log"), "-o", f"-p {self.port} -k {self.dir} "
                  "-c listen_addresses=127.0.0.1", "start")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-w", "-m", "fast",
                  "stop")

    def admin(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class Bed:
    """Where drills run: a PostgreSQL server (private when possible) and a private Redis."""

    def __init__(self, outage_s: float = OUTAGE_S, steps: int = 40) -> None:
        self.outage_s, self.steps = outage_s, steps  # smaller in --smoke
        self.root = Path(tempfile.mkdtemp(prefix="grpodeck-drills-"))
        self.pg = PrivatePostgres(self.root)
        self.admin = self.pg.init().admin() if self.pg.available else \
            "postgresql://postgres@127.0.0.1:5432/postgres"
        self.redis = PrivateRedis(self.root / "redis").start()

    def stack(self, name: str) -> Stack:
        db = f"drill_{name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        workdir = self.root / f"stack-{name}"
        workdir.mkdir()
        url = self.admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
        return Stack(f"{url}/{db}", self.redis.url, workdir, extra_env=ENV,
                     scheduler=True).start()

    def close(self) -> None:
        self.redis.stop()
        if self.pg.available:
            self.pg.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def outcome(stack: Stack, drill: str, expected: str, run_ids: list[int]) -> Result:
    result = Result(drill, expected)
    for run_id in run_ids:
        run = stack.wait_for(run_id, TERMINAL, timeout=900)
        result.got.append(run["status"])
        steps = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", params={"names": "loss"},
                          timeout=30).json().get("loss", {}).get("steps", [])
        logged = {s for s in stack.spool_steps(run_id) if s > 0}
        result.logged += len(logged)
        result.arrived += len(set(steps) & logged)
        result.duplicates += len(steps) - len(set(steps))
        if run["error"]:
            result.note = run["error"][:60]
    return result


def wait_steps(stack: Stack, run_id: int, n: int) -> None:
    stack.wait_until(lambda: max(stack.spool_steps(run_id), default=0) >= n, f"step {n}", 600)


def web_mid(bed: Bed) -> Result:
    stack = bed.stack("web-mid")
    try:
        run_id = stack.launch(name="web-mid", max_steps=bed.steps, **TINY)
        wait_steps(stack, run_id, 3)
        stack.kill("web")
        time.sleep(bed.outage_s)
        stack.start_web()
        return outcome(stack, f"web down {bed.outage_s:.0f} s mid-run", "succeeded", [run_id])
    finally:
        stack.stop()


def web_end(bed: Bed) -> Result:
    stack = bed.stack("web-end")
    try:
        n = 10
        run_id = stack.launch(name="web-end", max_steps=n, **TINY)
        wait_steps(stack, run_id, n - 3)
        stack.kill("web")
        down_at = time.monotonic()
        stack.wait_until(lambda: stack.training_done(run_id), "training to end", 600)
        time.sleep(max(0.0, bed.outage_s - (time.monotonic() - down_at)))
        stack.start_web()
        return outcome(stack, f"web down {bed.outage_s:.0f} s at the end", "succeeded", [run_id])
    finally:
        stack.stop()


def worker_kill(bed: Bed) -> Result:
    stack = bed.stack("worker-kill")
    try:
        run_id = stack.launch(name="worker-kill", max_steps=10_000, **TINY)
        wait_steps(stack, run_id, 4)
        child = stack.training_child(run_id)
        stack.kill("worker", signal.SIGKILL)
        killed = time.monotonic()
        stack.wait_until(lambda: child is None or not child.is_running()
                         or child.status() == psutil.STATUS_ZOMBIE, "the child to exit", 30)
        child_s = time.monotonic() - killed
        result = outcome(stack, "worker kill -9 mid-run", "failed", [run_id])
        result.note = (f"child gone in {child_s:.1f} s, run ended in "
                       f"{time.monotonic() - killed:.0f} s; {result.note}")
        return result
    finally:
        stack.stop()


def broker(bed: Bed) -> Result:
    stack = bed.stack("broker")
    try:
        first = stack.launch(name="broker-a", max_steps=10, **TINY)
        queued = [stack.launch(name=f"broker-{c}", max_steps=3, **TINY) for c in "bc"]
        wait_steps(stack, first, 2)
        assert all(stack.run(r)["status"] == "queued" for r in queued)
        bed.redis.stop()
        time.sleep(5)
        bed.redis.start()
        result = outcome(stack, "Redis restart, 1 running + 2 queued", "succeeded",
                         [first, *queued])
        return result
    finally:
        stack.stop()


def pg(bed: Bed) -> Result:
    if not bed.pg.available:
        return Result("PostgreSQL restart mid-run", "succeeded", note="no pg_ctl: not run")
    stack = bed.stack("pg")
    try:
        run_id = stack.launch(name="pg", max_steps=30, **TINY)
        wait_steps(stack, run_id, 3)
        bed.pg.stop()
        time.sleep(10)
        bed.pg.start()
        return outcome(stack, "PostgreSQL restart mid-run", "succeeded", [run_id])
    finally:
        stack.stop()


DRILLS: dict[str, Callable[[Bed], Result]] = {
    "web-mid": web_mid, "web-end": web_end, "worker-kill": worker_kill, "broker": broker, "pg": pg}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("drills", nargs="*", metavar="DRILL", help=" ".join(DRILLS))
    parser.add_argument("--smoke", action="store_true", help="web-mid, 10 steps, 3 s down")
    args = parser.parse_args()
    if unknown := set(args.drills) - set(DRILLS):
        parser.error(f"unknown drills {sorted(unknown)}; known: {' '.join(DRILLS)}")
    names = ["web-mid"] if args.smoke else args.drills or list(DRILLS)
    bed = Bed(3, 10) if args.smoke else Bed()
    results = []
    try:
        for name in names:
            started = time.monotonic()
            try:
                result = DRILLS[name](bed)
            except Exception as exc:  # noqa: BLE001 - a broken drill fails; the others still run
                first_line = str(exc).splitlines()[0][:80] if str(exc) else ""
                result = Result(name, "?", note=f"{type(exc).__name__}: {first_line}")
            print(f"# {name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
            results.append(result)
    finally:
        bed.close()
    print("| drill | status expected / got | steps logged / arrived | duplicates | result | note |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.drill} | {r.expected} / {', '.join(r.got) or '-'} | {r.logged} / {r.arrived} "
              f"| {r.duplicates} | {'pass' if r.passed else 'FAIL'} | {r.note} |")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
