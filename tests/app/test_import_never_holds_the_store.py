"""Issue 55: a long import never holds the store. A 17 MB OpenRLHF log took a minute to import
while the scheduler logged "database is locked" and a worker's heartbeat timed out: the import
kept one write transaction open from its first row to its last (and, with a remembered mapping,
through the whole parse).

Here a log of several MB is imported through ``POST /api/imports`` on a SQLite file while a
worker's heartbeat (HTTP), a running run's metric report (the fast path) and the scheduler's
heartbeat (its own process, ``tests.app.scheduler_probe``) keep writing. Each must go through
within ``BOUND_S``, and some of each while the imported run still lacked rows: recorded state
(the steps stored when the write was through), never a sleep. SQLite only: one writer at a time
per database is SQLite's; PostgreSQL's writers lock rows, and nobody else writes these."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

import app.imports.service as imports
from app.core.db import get_sessionmaker
from app.runs import service as runs
from grpodeck.contract.heartbeat import HEARTBEAT_PATH
from tests.app.conftest import running_run
from tests.conftest import trainer_state

pytestmark = pytest.mark.one_backend
BOUND_S = 2.0  # a heartbeat or a report answers within this while the import runs
STEPS = 8_000  # ~12 MB: a metrics dict and a printed sample (LaTeX braces) per step
GIVE_UP_S = 120.0
STORED = text("SELECT (SELECT coalesce(sum(c.n), 0) FROM metric_chunks c JOIN metric_keys k "
              "ON k.id = c.metric_id WHERE c.run_id = :run AND k.name = 'reward')"
              " + (SELECT count(*) FROM metric_inbox WHERE run_id = :run)")
SAMPLE = ("[sample] <|im_start|>user Solve $\\frac{1}{2} + \\frac{3}{4}$, answer in \\boxed{}."
          " <|im_start|>assistant \\frac{1}{2} = \\frac{2}{4}, so the sum is \\frac{5}{4}: "
          "\\boxed{\\frac{5}{4}} {done} ") * 3
KEYS = ("policy_loss", "actor_lr", "clip_ratio", "ppo_kl", "kl", "reward", "return",
        "response_length", "total_length", "policy_entropy", "critic_loss", "values",
        "critic_lr", "advantages", "grad_norm", "reward_std", "length_clip_ratio", "score")


def openrlhf_log(path: Path, steps: int) -> Path:
    """OpenRLHF's console output: a printed sample, then the step's metrics dict."""
    rnd = random.Random(55)
    with path.open("w") as out:
        for step in range(1, steps + 1):
            status = {"train/global_step": step, **{f"train/{k}": rnd.random() for k in KEYS}}
            out.write(f"{SAMPLE}\nEpisode [1/1]: {step}/{steps} {status}\n")
    return path


@dataclass(frozen=True)
class Write:
    """One probe's write: how long it took, what went wrong, the imported steps stored then."""

    kind: str
    seconds: float
    error: str | None
    stored: int


class Import:
    """``POST /api/imports`` on its own thread; ``writing`` is set once the imported run
    exists (its rows are what is left to store), with its id."""

    def __init__(self, client: TestClient, monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
        self.writing, self.done = threading.Event(), threading.Event()
        self.run_id = 0
        self.reply: Any = None
        create = runs.create_imported_run

        def created(*args: Any, **kwargs: Any) -> Any:
            run = create(*args, **kwargs)
            self.run_id = run.id
            self.writing.set()
            return run

        monkeypatch.setattr(runs, "create_imported_run", created)
        self.thread = threading.Thread(target=self._post, args=(client, log), daemon=True)

    def _post(self, client: TestClient, log: Path) -> None:
        try:
            self.reply = client.post("/api/imports", files={"log": ("openrlhf.log",
                                                                    log.read_bytes())})
        finally:
            self.done.set()
            self.writing.set()  # a failed import must not leave the probes waiting


def stored_steps(run_id: int) -> int:
    """Steps of the imported run any reader sees now (WAL: this read waits for nobody)."""
    with get_sessionmaker()() as db:
        return int(db.execute(STORED, {"run": run_id}).scalar() or 0)


def probe(kind: str, write: Callable[[], str | None], job: Import, out: list[Write]) -> None:
    """Write again and again until the import has stored every step (or ended)."""
    deadline = time.monotonic() + GIVE_UP_S
    while not job.done.is_set() and time.monotonic() < deadline:
        started = time.monotonic()
        error = write()
        seconds = time.monotonic() - started
        stored = stored_steps(job.run_id)
        out.append(Write(kind, seconds, error, stored))
        if stored >= STEPS:
            return


def worker_heartbeat(client: TestClient) -> Callable[[], str | None]:
    def write() -> str | None:
        reply = client.post(HEARTBEAT_PATH, json={"name": "celery@probe", "host": "p", "pid": 1})
        return None if reply.status_code == 204 else f"{reply.status_code} {reply.text[:200]}"
    return write


def metric_report(client: TestClient) -> Callable[[], str | None]:
    run_id, headers = running_run(client)
    step = iter(range(1, 10**6))

    def write() -> str | None:
        rows = [{"step": next(step), "metrics": {"reward": 0.5, "kl": 0.01}}]
        reply = client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows}, headers=headers)
        return None if reply.status_code == 200 else f"{reply.status_code} {reply.text[:200]}"
    return write


def scheduler_process() -> subprocess.Popen[str]:
    """``tests.app.scheduler_probe``, started and past its first beat. Its busy timeout is the
    bound: a store held longer fails its beat with "database is locked", as in the issue."""
    env = {**os.environ, "GRPODECK_DATABASE_LOCK_TIMEOUT_SECONDS": str(BOUND_S)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.app.scheduler_probe", str(STEPS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def scheduler_writes(proc: subprocess.Popen[str]) -> list[Write]:
    out, _ = proc.communicate(timeout=GIVE_UP_S)
    return [Write("scheduler heartbeat", **json.loads(line)) for line in out.splitlines()]


def report(writes: list[Write]) -> str:
    """The numbers, for the failure message and ``-s``."""
    lines = []
    for kind in sorted({w.kind for w in writes}):
        mine = [w for w in writes if w.kind == kind]
        during = [w for w in mine if w.stored < STEPS]
        errors = sorted({w.error for w in mine if w.error})
        lines.append(f"{kind}: {len(mine)} writes, {len(during)} while rows were left to "
                     f"store, max wait {max(w.seconds for w in mine):.2f} s, errors {errors}")
    return "\n".join(lines)


def test_heartbeats_and_metric_reports_go_through_while_a_large_log_is_imported(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = openrlhf_log(tmp_path / "openrlhf.log", STEPS)
    assert log.stat().st_size > 5_000_000
    beats, reports = worker_heartbeat(client), metric_report(client)
    scheduler = scheduler_process()
    job = Import(client, monkeypatch, log)
    started = time.monotonic()
    job.thread.start()
    assert job.writing.wait(GIVE_UP_S), "the import never began to store its run"
    assert scheduler.stdin is not None
    scheduler.stdin.write("go\n")
    scheduler.stdin.flush()
    writes: list[Write] = []
    probes = [threading.Thread(target=probe, args=(kind, write, job, writes))
              for kind, write in (("worker heartbeat", beats), ("metric report", reports))]
    for thread in probes:
        thread.start()
    job.thread.join(GIVE_UP_S)
    for thread in probes:
        thread.join(GIVE_UP_S)
    writes += scheduler_writes(scheduler)
    numbers = f"import {time.monotonic() - started:.1f} s\n{report(writes)}"
    print(numbers)
    assert job.reply is not None and job.reply.status_code == 201, job.reply
    assert stored_steps(job.run_id) == STEPS
    for kind in ("worker heartbeat", "metric report", "scheduler heartbeat"):
        mine = [w for w in writes if w.kind == kind]
        assert mine and not any(w.error for w in mine), numbers
        assert max(w.seconds for w in mine) < BOUND_S, numbers
        assert any(w.stored < STEPS for w in mine), f"no {kind} went through while the " \
                                                    f"import had rows left to store\n{numbers}"


def test_a_log_being_read_holds_no_lock_even_when_its_mapping_is_remembered(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``save_map`` the mapping was written first and its transaction stayed open through
    the whole parse: a heartbeat sent while the log is being read must go through at once."""
    answers: list[object] = []
    read = imports.load_log

    def reading(*args: Any, **kwargs: Any) -> Any:
        pool = ThreadPoolExecutor(1)
        beat = pool.submit(client.post, HEARTBEAT_PATH, json={"name": "celery@p", "pid": 1})
        try:
            answers.append(beat.result(timeout=BOUND_S).status_code)
        except TimeoutError:
            answers.append(f"no answer within {BOUND_S} s")
        pool.shutdown(wait=False)  # a heartbeat stuck behind this import is answered after it
        return read(*args, **kwargs)

    monkeypatch.setattr(imports, "load_log", reading)
    state = json.dumps(trainer_state(range(1, 30), Score=lambda s: s / 30, loss=0.1)).encode()
    reply = client.post("/api/imports", files={"log": ("loop.json", state)},
                        data={"map": ["Score=reward"], "save_map": "true"})
    assert reply.status_code == 201, reply.text
    assert answers == [204]
    again = client.post("/api/imports", files={"log": ("loop.json", state)})
    [run] = again.json()["runs"]
    assert client.get(f"/api/runs/{run['id']}").json()["spec"]["mapping_saved_for"] == "loop.json"
