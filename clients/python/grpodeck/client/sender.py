"""The background sender: the training thread only enqueues; this thread spools, posts,
heartbeats and reads the server's stop. Both reporters use it: ``DeckCallback`` (a user's own
script) and the worker's ``MetricsReporter`` (``worker.training.reporting``).

Why a thread plus the disk spool: a step must never wait on the network, and an outage must
lose nothing. Every row is appended to the spool (``grpodeck.client.spool``) before any attempt
to send it; the thread posts what lies past the acknowledged prefix in bounded batches and moves
the prefix (the spool's ``.acked`` line count, which the worker's supervisor replays from) only
when the server took them. A restart of the web app, or an outage of any length, therefore
delays rows and never drops or repeats them (the server also merges by step and name).
Captured rollouts are samples, not the record: they wait in memory (the latest few) only.

The server's answers:

- 2xx: delivered; its ``stop`` (a user's cancel, a guard rail) sets ``state.stop``. With no rows
  to send the thread still posts an empty batch every ``flush_seconds`` (a heartbeat), so a
  stop reaches a run between logging steps.
- 401/404/409: the run is over on the server (ended, lost, token revoked): ``state.run_over``
  and ``state.stop``; nothing more is sent and the spool is marked done (nothing to replay).
- any other 4xx (a 422): resending would fail forever, so that batch is dropped (acknowledged)
  with a warning and later rows go on; rows the contract's models already refuse are dropped
  before the round trip, one by one.
- 429, 5xx, no answer: back off (doubling from ``flush_seconds``, at most ``MAX_BACKOFF``) and
  retry the same rows; when the answer carries ``Retry-After`` (503 while another transaction
  holds the database's lock, 429), the next try comes after what the server asked instead.

Between posts the thread sleeps on its queue (it wakes for a new item or the next post, never
polls). ``close(deadline)`` delivers what is left for at most ``deadline`` seconds; whatever
the server has not taken by then stays unacknowledged in the spool.
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
from pydantic import BaseModel, TypeAdapter, ValidationError

from grpodeck.client import spool
from grpodeck.client.retry import retry_after
from grpodeck.contract.wire import FinishedIn, IngestReply, MetricRow, RolloutStep

log = logging.getLogger("grpodeck.client")

ROWS_PER_POST = 500
_ROWS = TypeAdapter(list[MetricRow])  # the server's model over a whole batch of spooled lines
ROLLOUTS_PER_POST = 5  # captured steps per POST (and this many waiting trigger a post)
MAX_ROLLOUT_STEPS = 20  # captured steps kept while the server is away (oldest dropped)
RUN_OVER = (401, 404, 409)  # the server no longer takes reports for this run
MIN_FLUSH_SECONDS = 0.1  # a heartbeat at most this often, a retry no sooner (never spin)
MAX_BACKOFF = 30.0
CLOSING_RETRY = 2.0  # while closing, a failed post is retried at least this often

OK, REFUSED, FAILED, OVER = "ok", "refused", "failed", "over"


def _loads(line: bytes) -> Any:
    """One spooled line, or None when it is not JSON (dropped like any row the wire refuses)."""
    try:
        return json.loads(line)
    except ValueError:
        return None


@dataclass
class Target:
    """Where and as whom to report (known once the run is registered)."""
    base_url: str
    run_id: int | str
    token: str


@dataclass
class SenderState:
    """What the training thread reads back: set here, never waited on."""
    stop: bool = False
    stop_reason: str | None = None
    run_over: bool = False
    rows_delivered: int = 0
    rows_dropped: int = 0
    failures: int = 0
    last_error: str | None = None
    rollout_steps: list[dict[str, Any]] = field(default_factory=list)


def _complete_lines(path: Path) -> list[int]:
    """The byte length of each complete (newline-ended) line of the spool."""
    with path.open("rb") as fh:
        return [len(line) for line in fh if line.endswith(b"\n")]


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"


class Sender(threading.Thread):
    """Drain ``inbox`` into the spool; post unacknowledged rows every ``flush_seconds`` (and as
    soon as ``batch_rows`` rows wait, when given)."""

    def __init__(self, target: Target, spool_path: Path, *, flush_seconds: float = 2.0,
                 batch_rows: int | None = None, queue_size: int = 10_000,
                 timeout: float = 5.0) -> None:
        super().__init__(name="grpodeck-sender", daemon=True)
        self.target = target
        self.spool_path = Path(spool_path)
        self.flush_seconds = max(MIN_FLUSH_SECONDS, flush_seconds)
        self.batch_rows = batch_rows
        self.inbox: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=queue_size)
        self.state = SenderState()
        self._closing = threading.Event()
        self._stopped = threading.Event()
        self._spool_lock = threading.Lock()
        self._server_wait: float | None = None  # the last failure's Retry-After, if it had one
        self._http = httpx.Client(base_url=target.base_url.rstrip("/"), timeout=timeout,
                                  headers={"Authorization": f"Bearer {target.token}"})
        self.spool_path.parent.mkdir(parents=True, exist_ok=True)
        self.spool_path.touch()
        # A spool that already holds lines (a reused output dir) keeps its acknowledged prefix;
        # a torn last line (a process killed mid-write) is ended, so new rows start clean.
        with self.spool_path.open("rb+") as fh:
            if fh.seek(0, 2) > 0:
                fh.seek(-1, 2)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
        sizes = _complete_lines(self.spool_path)
        self._acked_lines = min(spool.acked(self.spool_path), len(sizes))
        self._offset = sum(sizes[:self._acked_lines])  # bytes the server has acknowledged
        self._spooled_lines = len(sizes)

    # -- training thread -------------------------------------------------------------------
    def put_rows(self, rows: list[dict[str, Any]]) -> None:
        """Never blocks: a full queue (the thread is stuck on disk) spools on this thread."""
        if not rows or self.state.run_over:
            return
        try:
            self.inbox.put_nowait(("rows", rows))
        except queue.Full:
            self._spool(rows)

    def put_rollouts(self, step: int, groups: list[dict[str, Any]]) -> None:
        if not groups or self.state.run_over:
            return
        try:
            self.inbox.put_nowait(("rollouts", {"step": int(step), "groups": groups}))
        except queue.Full:
            pass  # samples: dropping one is harmless

    def close(self, deadline: float) -> bool:
        """Deliver everything queued and spooled, for at most ``deadline`` seconds, then stop
        the thread (a post in flight ends on its own timeout). Whatever the server has not
        taken stays unacknowledged in the spool. True when nothing is left."""
        self._closing.set()
        self._wake()
        if self.is_alive():
            self.join(timeout=max(0.0, deadline))
        self._stopped.set()
        self._wake()
        self._settle()
        return self.state.run_over or self.pending() == 0

    def pending(self) -> int:
        """Spooled rows the server has not acknowledged."""
        return self._spooled_lines - self._acked_lines

    def _wake(self) -> None:
        try:
            self.inbox.put_nowait(("wake", None))
        except queue.Full:
            pass  # a full queue wakes the thread anyway

    # -- this thread -----------------------------------------------------------------------
    def run(self) -> None:
        next_post = 0.0  # the first heartbeat says at once that the run is alive
        closing_seen = False
        try:
            while not self._stopped.is_set():
                self._drain()
                if self.state.run_over:
                    break
                if self._closing.is_set() and not closing_seen:
                    closing_seen, next_post = True, 0.0
                if closing_seen and self._caught_up():
                    return
                if time.monotonic() >= next_post or self._batch_due():
                    try:
                        delivered_all = self._post_all()
                    except Exception as exc:  # a bug here must not end reporting
                        log.exception("grpodeck: unexpected error while sending")
                        self._failed(repr(exc))
                        delivered_all = False
                    wait = self.flush_seconds if delivered_all else self._backoff()
                    next_post = time.monotonic() + (min(wait, CLOSING_RETRY) if closing_seen
                                                    else wait)
                    continue  # look again (closing? caught up?) before sleeping
                self._sleep_until(next_post)
        finally:
            self._settle()

    def _caught_up(self) -> bool:
        return self._spooled_lines == self._acked_lines and not self.state.rollout_steps

    def _sleep_until(self, when: float) -> None:
        """Block on the queue until an item arrives or ``when``: no polling while idle."""
        try:
            item = self.inbox.get(timeout=max(0.0, when - time.monotonic()))
        except queue.Empty:
            return
        self._drain(item)

    def _batch_due(self) -> bool:
        if self.state.failures:
            return False  # backing off: new rows wait for the next try
        waiting = self._spooled_lines - self._acked_lines
        return (self.batch_rows is not None and waiting >= self.batch_rows) or len(
            self.state.rollout_steps) >= ROLLOUTS_PER_POST

    def _backoff(self) -> float:
        """The server's Retry-After when it gave one, else doubling from flush_seconds."""
        if self._server_wait is not None:
            return min(MAX_BACKOFF, max(MIN_FLUSH_SECONDS, self._server_wait))
        return min(MAX_BACKOFF, self.flush_seconds * 2 ** min(self.state.failures, 5))

    def _spool(self, rows: list[dict[str, Any]]) -> None:
        with self._spool_lock:
            spool.append(self.spool_path, rows)
            self._spooled_lines += len(rows)

    def _drain(self, first: tuple[str, Any] | None = None) -> None:
        rows: list[dict[str, Any]] = []
        item = first
        while True:
            if item is not None:
                kind, payload = item
                if kind == "rows":
                    rows.extend(payload)
                elif kind == "rollouts":
                    self.state.rollout_steps.append(payload)
                    del self.state.rollout_steps[:-MAX_ROLLOUT_STEPS]
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                break
        if rows:
            self._spool(rows)

    def _settle(self) -> None:
        """Whatever is still queued goes to the spool; a run that is over has nothing left to
        send, so its spool is marked done (the supervisor's replay would only be refused)."""
        self._drain()
        if not self.state.run_over:
            return
        with self._spool_lock:
            sizes = _complete_lines(self.spool_path)
            self._acked_lines, self._offset = len(sizes), sum(sizes)
            spool.mark_acked(self.spool_path, self._acked_lines)
        self.state.rollout_steps.clear()

    def _unsent(self) -> tuple[list[bytes], list[int]]:
        """Up to ROWS_PER_POST unacknowledged lines of the spool, as written, and the byte
        length of each."""
        lines: list[bytes] = []
        with self._spool_lock, self.spool_path.open("rb") as fh:
            fh.seek(self._offset)
            for line in fh:
                if not line.endswith(b"\n") or len(lines) >= ROWS_PER_POST:
                    break
                lines.append(line)
        return lines, [len(line) for line in lines]

    def _rows_json(self, lines: list[bytes]) -> tuple[bytes, int]:
        """The rows as the body's JSON array, and how many. The spooled lines are sent as they
        were written once the server's own model accepts all of them in one pass (parsed and
        checked in pydantic-core, no Python object per row); otherwise each line is checked and
        only the rows it accepts are sent."""
        joined = b"[" + b",".join(lines) + b"]"
        try:
            _ROWS.validate_json(joined)
            return joined, len(lines)
        except ValidationError:
            good = self._valid(MetricRow, [_loads(line) for line in lines], "rows")
            return json.dumps([r.model_dump(mode="json") for r in good]).encode(), len(good)

    def _valid(self, model: type[BaseModel], items: list[Any], what: str) -> list[Any]:
        """The items the server's own model accepts; the others are dropped with a warning."""
        good, bad, why = [], 0, ""
        for item in items:
            try:
                good.append(model.model_validate(item))
            except ValidationError as exc:
                bad, why = bad + 1, why or _first_error(exc)
        if bad:
            log.warning("grpodeck: dropping %d %s the server would refuse (%s)", bad, what, why)
            if what == "rows":
                self.state.rows_dropped += bad
        return good

    def _post_all(self) -> bool:
        """Post every unacknowledged row (an empty batch is the heartbeat). False on failure."""
        while not self._stopped.is_set():
            lines, sizes = self._unsent()
            rollouts = self.state.rollout_steps[:ROLLOUTS_PER_POST]
            rows_json, n_rows = self._rows_json(lines)
            steps = self._valid(RolloutStep, rollouts, "rollout steps")
            if lines and not n_rows and not steps:
                outcome = REFUSED  # nothing left worth a round trip
            else:
                body = b'{"rows":' + rows_json
                if steps:
                    body += b',"rollouts":' + json.dumps(
                        [step.model_dump(mode="json") for step in steps]).encode()
                outcome = self._post(body + b"}", n_rows)
            if outcome in (FAILED, OVER):
                return False
            self._acked(sizes, len(rollouts), delivered=outcome == OK)
            if len(lines) < ROWS_PER_POST and not self.state.rollout_steps:
                return True
        return False

    def _acked(self, sizes: list[int], n_rollouts: int, delivered: bool) -> None:
        del self.state.rollout_steps[:n_rollouts]
        if not sizes:
            return
        with self._spool_lock:
            self._offset += sum(sizes)
            self._acked_lines += len(sizes)
            spool.mark_acked(self.spool_path, self._acked_lines)
        if delivered:
            self.state.rows_delivered += len(sizes)

    def _post(self, body: bytes, n_rows: int) -> str:
        try:
            response = self._http.post(f"/api/runs/{self.target.run_id}/metrics", content=body,
                                       headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            return self._failed(str(exc) or type(exc).__name__)
        status = response.status_code
        if status in RUN_OVER:
            log.warning("grpodeck: the server no longer takes reports for run %s (%d); stopping",
                        self.target.run_id, status)
            self.state.run_over = self.state.stop = True
            return OVER
        if status == 429 or not (200 <= status < 300 or 400 <= status < 500):
            return self._failed(f"HTTP {status}: {response.text[:200]}", retry_after(response))
        self._back()
        if status >= 400:  # refused for good: resending would fail forever
            log.warning("grpodeck: the server refused %d rows (HTTP %d: %s); dropping them",
                        n_rows, status, response.text[:200])
            self.state.rows_dropped += n_rows
            return REFUSED
        self._reply(response)
        return OK

    def _back(self) -> None:
        if self.state.failures:
            log.warning("grpodeck: the server is back; sending what was kept on disk")
        self.state.failures = 0

    def _reply(self, response: httpx.Response) -> None:
        try:
            reply = IngestReply.model_validate(response.json())
        except (ValidationError, ValueError):
            return
        if reply.stop and not self.state.stop:
            log.warning("grpodeck: the server asked run %s to stop (%s)", self.target.run_id,
                        reply.reason or "no reason given")
            self.state.stop, self.state.stop_reason = True, reply.reason

    def _failed(self, why: str, server_wait: float | None = None) -> str:
        self._server_wait = server_wait
        if not self.state.failures:
            log.warning("grpodeck: cannot report to %s (%s); rows are kept in %s and sent when "
                        "it answers", self.target.base_url, why, self.spool_path)
        self.state.failures += 1
        self.state.last_error = why
        return FAILED

    # -- after close -----------------------------------------------------------------------
    def finish(self, returncode: int, error: str | None = None, attempts: int = 5) -> str | None:
        """Report how training ended; the run's final status, or None when it never arrived."""
        body = FinishedIn(returncode=returncode, error=error).model_dump(mode="json")
        for attempt in range(attempts):
            wait = min(8.0, 0.5 * 2 ** attempt)
            try:
                response = self._http.post(f"/api/runs/{self.target.run_id}/finished", json=body)
                if response.status_code < 500 and response.status_code != 429:
                    return str(response.json().get("status")) if response.is_success else None
                wait = retry_after(response) or wait  # 503 while the database is locked
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(wait)
        return None

    def shutdown(self) -> None:
        """Stop the thread; close the HTTP client unless a post is still in flight (then the
        daemon thread ends with it, bounded by the client's timeout)."""
        self._stopped.set()
        self._wake()
        if not self.is_alive():
            self._http.close()
