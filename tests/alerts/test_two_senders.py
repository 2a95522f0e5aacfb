"""Two scheduler processes running at once (by mistake) still deliver each job exactly once:
jobs are claimed with a conditional update (FOR UPDATE SKIP LOCKED on PostgreSQL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

from sqlalchemy import select

from app.alerts import outbox
from app.alerts.models import Delivery
from app.core.config import ROOT
from app.core.db import get_sessionmaker
from tests.alerts.receivers import HttpReceiver

JOBS = 60
DESTINATIONS = 4


def test_two_sender_processes_deliver_each_job_once(app_db: str, receiver: HttpReceiver,
                                                    tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "GRPODECK_DATABASE_URL": app_db, "GRPODECK_ALERT_POLL_SECONDS": "0.02",
           "GRPODECK_LOST_CHECK_SECONDS": "3600", "PYTHONUNBUFFERED": "1",
           "GRPODECK_ALERT_ALLOW_HOSTS": "127.0.0.1"}  # the receiver is on loopback
    logs = [(tmp_path / f"sender{i}.log").open("wb") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-m", "app.scheduler"], env=env, cwd=ROOT,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
             for log in logs]
    receiver.delay = 0.2  # each sender stays busy with a destination while new jobs arrive
    urls = [f"webhook+{receiver.url(f'/d{i}')}" for i in range(DESTINATIONS)]
    try:
        receiver.wait_for(lambda: all(b"sending alerts" in (tmp_path / f"sender{i}.log")
                                      .read_bytes() for i in range(2)),
                          "both senders polling", timeout=120)
        with get_sessionmaker()() as db:
            for n in range(JOBS // DESTINATIONS):
                for url in urls:
                    outbox.enqueue(db, None, "test", [], {"kind": "test", "title": "t",
                                                          "text": "t", "n": n}, urls=[url])
                db.commit()
                time.sleep(0.05)
        receiver.wait_for(lambda: len(receiver.received) >= JOBS, f"{JOBS} deliveries")
        time.sleep(2)  # a duplicate would arrive in this time
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)
    seen = Counter((r.path, r.body["n"]) for r in receiver.received)
    assert len(seen) == JOBS and set(seen.values()) == {1}, seen.most_common(3)
    assert len(receiver.attempts) == JOBS
    with get_sessionmaker()() as db:
        jobs = db.scalars(select(Delivery)).all()
    assert {j.status for j in jobs} == {"sent"} and {j.attempts for j in jobs} == {1}
    assert len({j.claimed_by for j in jobs}) == 2, "both senders should have taken jobs"
