"""The callback's background sender: the training thread only enqueues; this thread spools,
posts, heartbeats and reads the server's stop.

Why a thread plus the disk spool: a step must never wait on the network, and an outage must
lose nothing. Every row is appended to the spool (``grpodeck.client.spool``) before any attempt
to send it; the thread posts what lies past the acknowledged prefix in bounded batches and moves
the prefix only when the server took them. A restart of the web app, or an outage of any length,
therefore delays rows and never drops or repeats them (the server also merges by step and name).
Captured rollouts are samples, not the record: they wait in memory (the latest few) only.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from grpodeck.client import spool
from grpodeck.contract.wire import FinishedIn, IngestReply, MetricBatch, MetricRow, RolloutStep

log = logging.getLogger("grpodeck.client")

ROWS_PER_POST = 500
MAX_ROLLOUT_STEPS = 20  # captured steps kept while the server is away (oldest dropped)
RUN_OVER = (401, 404, 409)  # the server no longer takes reports for this run


@dataclass
class Target:
    """Where and as whom to report (known once the run is registered)."""
    base_url: str
    run_id: int
    token: str


@dataclass
class SenderState:
    """What the training thread reads back: set here, never waited on."""
    stop: bool = False
    stop_reason: str | None = None
    run_over: bool = False
    rows_delivered: int = 0
    failures: int = 0
    last_error: str | None = None
    rollout_steps: list[dict[str, Any]] = field(default_factory=list)


class Sender(threading.Thread):
    """Drain ``queue`` into the spool; post unacknowledged rows every ``flush_seconds``."""

    def __init__(self, target: Target, spool_path: Path, *, flush_seconds: float = 2.0,
                 queue_size: int = 10_000, timeout: float = 5.0) -> None:
        super().__init__(name="grpodeck-sender", daemon=True)
        self.target = target
        self.spool_path = spool_path
        self.flush_seconds = flush_seconds
        self.inbox: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=queue_size)
        self.state = SenderState()
        self._offset = 0  # bytes of the spool the server has acknowledged
        self._acked_lines = 0
        self._closing = threading.Event()
        self._spool_lock = threading.Lock()
        self._http = httpx.Client(base_url=target.base_url, timeout=timeout,
                                  headers={"Authorization": f"Bearer {target.token}"})
        spool_path.parent.mkdir(parents=True, exist_ok=True)
        spool_path.touch()

    # -- training thread -------------------------------------------------------------------
    def put_rows(self, rows: list[dict[str, Any]]) -> None:
        """Never blocks: a full queue (the thread is stuck on disk) spools on this thread."""
        try:
            self.inbox.put_nowait(("rows", rows))
        except queue.Full:
            self._spool(rows)

    def put_rollouts(self, step: int, groups: list[dict[str, Any]]) -> None:
        try:
            self.inbox.put_nowait(("rollouts", {"step": int(step), "groups": groups}))
        except queue.Full:
            pass  # samples: dropping one is harmless

    def close(self, deadline: float) -> bool:
        """Deliver everything spooled (for up to ``deadline`` s); True when nothing is left."""
        self._closing.set()
        self.join(timeout=deadline)
        left = self.pending()
        self._closing.clear()
        return not left

    # -- this thread -----------------------------------------------------------------------
    def _spool(self, rows: list[dict[str, Any]]) -> None:
        with self._spool_lock:
            spool.append(self.spool_path, rows)

    def _drain(self) -> None:
        rows: list[dict[str, Any]] = []
        while True:
            try:
                kind, item = self.inbox.get_nowait()
            except queue.Empty:
                break
            if kind == "rows":
                rows.extend(item)
            else:
                self.state.rollout_steps.append(item)
                del self.state.rollout_steps[:-MAX_ROLLOUT_STEPS]
        if rows:
            self._spool(rows)

    def _unsent(self) -> tuple[list[dict[str, Any]], list[int]]:
        """Up to ROWS_PER_POST unacknowledged rows and the byte length of each one's line."""
        rows, sizes = [], []
        with self._spool_lock, self.spool_path.open("rb") as fh:
            fh.seek(self._offset)
            for line in fh:
                if not line.endswith(b"\n") or len(rows) >= ROWS_PER_POST:
                    break
                rows.append(json.loads(line))
                sizes.append(len(line))
        return rows, sizes

    def pending(self) -> int:
        return len(spool.unacked(self.spool_path, start=self._acked_lines))

    def run(self) -> None:
        next_post = 0.0
        while True:
            self._drain()
            closing = self._closing.is_set()
            if self.state.run_over:
                return
            if time.monotonic() >= next_post or closing:
                delivered_all = self._post_all()
                if closing and delivered_all and self.inbox.empty():
                    return
                wait = self.flush_seconds if delivered_all else min(
                    30.0, self.flush_seconds * 2 ** min(self.state.failures, 4))
                next_post = time.monotonic() + (0.5 if closing and not delivered_all else wait)
            self._closing.wait(0.05) if not closing else time.sleep(0.05)

    def _post_all(self) -> bool:
        """Post every unacknowledged row (an empty batch is the heartbeat). False on failure."""
        while True:
            rows, sizes = self._unsent()
            rollouts = self.state.rollout_steps[:5]
            try:
                body = MetricBatch(rows=[MetricRow.model_validate(r) for r in rows],
                                   rollouts=[RolloutStep.model_validate(r) for r in rollouts])
            except ValidationError as exc:  # what the server would refuse with a 422
                log.warning("grpodeck: dropping %d rows the server would refuse: %s", len(rows),
                            str(exc).splitlines()[0])
                self._acked(sizes, len(rollouts))
                continue
            if not self._post(body):
                return False
            self._acked(sizes, len(rollouts))
            if len(rows) < ROWS_PER_POST and not self.state.rollout_steps:
                return True

    def _acked(self, sizes: list[int], n_rollouts: int) -> None:
        self._offset += sum(sizes)
        self._acked_lines += len(sizes)
        self.state.rows_delivered += len(sizes)
        del self.state.rollout_steps[:n_rollouts]
        spool.mark_acked(self.spool_path, self._acked_lines)

    def _post(self, body: MetricBatch) -> bool:
        exclude = None if body.rollouts else {"rollouts"}
        try:
            response = self._http.post(f"/api/runs/{self.target.run_id}/metrics",
                                       json=body.model_dump(mode="json", exclude=exclude))
        except httpx.HTTPError as exc:
            return self._failed(str(exc) or type(exc).__name__)
        if response.status_code in RUN_OVER:
            log.warning("grpodeck: the server no longer takes reports for run %d (%d); stopping",
                        self.target.run_id, response.status_code)
            self.state.run_over = self.state.stop = True
            return False
        if response.status_code >= 400:
            return self._failed(f"HTTP {response.status_code}: {response.text[:200]}")
        self._reply(response)
        return True

    def _reply(self, response: httpx.Response) -> None:
        if self.state.failures:
            log.warning("grpodeck: the server is back; sending what was kept on disk")
        self.state.failures = 0
        try:
            reply = IngestReply.model_validate(response.json())
        except (ValidationError, ValueError):
            return
        if reply.stop and not self.state.stop:
            log.warning("grpodeck: the server asked this run to stop (%s)", reply.reason)
            self.state.stop, self.state.stop_reason = True, reply.reason

    def _failed(self, why: str) -> bool:
        if not self.state.failures:
            log.warning("grpodeck: cannot reach %s (%s); rows are kept in %s and sent when it "
                        "returns", self.target.base_url, why, self.spool_path)
        self.state.failures += 1
        self.state.last_error = why
        return False

    def finish(self, returncode: int, error: str | None = None, attempts: int = 5) -> str | None:
        """Report how training ended; the run's final status, or None when it never arrived."""
        body = FinishedIn(returncode=returncode, error=error).model_dump(mode="json")
        for attempt in range(attempts):
            try:
                response = self._http.post(f"/api/runs/{self.target.run_id}/finished", json=body)
                if response.status_code < 500:
                    return str(response.json().get("status")) if response.is_success else None
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(min(8.0, 0.5 * 2 ** attempt))
        return None

    def shutdown(self) -> None:
        self._http.close()
