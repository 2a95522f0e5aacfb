"""The sender: claims due outbox jobs and delivers them, one thread per destination.

A slow or dead receiver only delays its own jobs: each destination is sent from its own thread
with its own timeout (``alert_timeout_seconds``), and a destination still busy is skipped by the
next claim. Jobs for many runs due at once to one destination go as one digest
(``alert_digest_runs``)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from app.alerts import channels, messages, outbox
from app.alerts.models import Delivery
from app.core.config import get_settings
from app.core.db import get_sessionmaker

log = logging.getLogger(__name__)


class Sender:
    def __init__(self, name: str | None = None, threads: int = 16) -> None:
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="alert-send")
        self.busy: set[str] = set()
        self.lock = threading.Lock()

    def cycle(self) -> int:
        """Claim what is due and hand each destination to a thread; returns jobs claimed."""
        with self.lock:
            busy = set(self.busy)
        with get_sessionmaker()() as db:
            jobs = outbox.claim(db, self.name, skip_keys=busy)
        by_destination: dict[str, list[Delivery]] = defaultdict(list)
        for job in jobs:
            by_destination[job.destination_key].append(job)
        for key, group in by_destination.items():
            with self.lock:
                self.busy.add(key)
            self.pool.submit(self._deliver, key, group)
        return len(jobs)

    def _deliver(self, key: str, jobs: Sequence[Delivery]) -> None:
        try:
            timeout = get_settings().alert_timeout_seconds
            alerting = [j for j in jobs if j.run_id is not None]
            single = [j for j in jobs if j.run_id is None]  # test messages
            if len({j.run_id for j in alerting}) >= get_settings().alert_digest_runs:
                self._send(alerting, messages.digest([j.payload for j in alerting]), timeout,
                           digest_id=uuid.uuid4().hex)
            else:
                single = jobs
            for job in single:
                self._send([job], job.payload, timeout)
        except Exception:
            log.exception("sending to %s failed", key)
        finally:
            with self.lock:
                self.busy.discard(key)

    def _send(self, jobs: Sequence[Delivery], payload: dict, timeout: float,
              digest_id: str | None = None) -> None:
        with get_sessionmaker()() as db:  # still ours for this attempt, however long the queue
            outbox.renew(db, jobs, timeout)
        started = time.monotonic()
        error = channels.send(jobs[0].destination, payload, timeout)
        seconds = time.monotonic() - started
        if error:
            log.warning("delivery %s failed: %s", [j.id for j in jobs], error)
        with get_sessionmaker()() as db:
            now = datetime.now(UTC)
            for job in jobs:
                outbox.record(db, job, ok=error is None, error=error, seconds=seconds,
                              owner=self.name, now=now, digest_id=digest_id)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
