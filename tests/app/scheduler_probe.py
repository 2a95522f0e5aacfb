"""The scheduler's heartbeat from a process of its own, timed while the test's web app imports a
log (tests/app/test_import_never_holds_the_store.py, issue 55).

Why a process: the scheduler is one, so it meets a long import at SQLite's busy handler, not at
the web process's writer hand-over (``app.core.db``); that is where it logged "database is
locked". Run as ``python -m tests.app.scheduler_probe STEPS`` with the app's database settings
in the environment: it beats once and prints ``ready``, waits for ``go`` on stdin, then beats
as ``app.scheduler.Beacon`` does until the newest imported run holds ``STEPS`` steps (or a
minute has passed), printing one JSON line per beat: the seconds it took, its error if any, and
the steps that run held once the beat was through."""

from __future__ import annotations

import json
import os
import sys
import time

from sqlalchemy import text

from app.core.db import get_sessionmaker
from app.processes.service import beat
from grpodeck.contract.heartbeat import Heartbeat

HEARTBEAT = Heartbeat(name="scheduler@probe", host="probe", pid=os.getpid())
GIVE_UP_S = 60.0
STORED = text("SELECT (SELECT coalesce(sum(c.n), 0) FROM metric_chunks c JOIN metric_keys k "
              "ON k.id = c.metric_id WHERE c.run_id = r.id AND k.name = 'reward')"
              " + (SELECT count(*) FROM metric_inbox WHERE run_id = r.id) FROM runs r "
              "WHERE r.source = 'imported' ORDER BY r.id DESC LIMIT 1")


def beat_once() -> str | None:
    """One beat as the scheduler writes it; its error, if the database refused it."""
    try:
        with get_sessionmaker()() as db:
            beat(db, "scheduler", HEARTBEAT)
            db.commit()
    except Exception as exc:  # noqa: BLE001 - the error is the measurement
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


def stored_steps() -> int:
    """Steps the newest imported run holds, as any reader sees them (0 before it exists)."""
    with get_sessionmaker()() as db:
        return int(db.execute(STORED).scalar() or 0)


def main(total: int) -> None:
    beat_once()  # the engine and its first connection, before the import begins
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        started = time.monotonic()
        error = beat_once()
        seconds = time.monotonic() - started
        stored = stored_steps()
        print(json.dumps({"seconds": seconds, "error": error, "stored": stored}), flush=True)
        if stored >= total:
            return


if __name__ == "__main__":
    main(int(sys.argv[1]))
