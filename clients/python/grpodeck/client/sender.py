"""The background sender: the training thread only enqueues; this thread spools, posts,
heartbeats and reads the server's stop. Both reporters use it: ``DeckCallback`` (a user's own
script) and the worker's ``MetricsReporter`` (``worker.training.reporting``).

Why a thread plus the disk spool: a step must never wait on the network, and an outage must
lose nothing. Every row is appended to the spool (``grpodeck.client.spool``) before any attempt
to send it; the thread posts what lies past the acknowledged prefix in bounded batches and moves
the prefix (the spool's ``.acked`` line count, which the worker's supervisor replays from) only
when the server took them. A restart of the web app, or an outage of any length, therefore
delays rows and never drops or repeats them (the server also merges by step and name).
Captured rollouts take the same path through a spool of their own (``rollouts.jsonl`` next to
the rows), bounded by size in bytes (``rollout_spool_bytes``): past it the oldest undelivered
captured steps are dropped and counted (``rollouts_dropped``), never silently
(``grpodeck.client.linespool``).

A run whose Deck did not answer at ``init`` has no target yet: the thread tries its
``registrar`` with the same back-off while everything logged waits in the spools, then
delivers it all in order.

The server's answers:

- 2xx: delivered; its ``stop`` (a user's cancel, a guard rail) sets ``state.stop``. With no rows
  to send the thread still posts an empty batch every ``flush_seconds`` (a heartbeat), so a
  stop reaches a run between logging steps.
- 401/404/409: the run is over on the server (ended, lost, token revoked): ``state.run_over``
  and ``state.stop``; nothing more is sent and the spool is marked done (nothing to replay).
- any other 4xx (a 422): resending would fail forever, so that batch is dropped (acknowledged)
  with a warning and later rows go on; rows the contract's models already refuse are dropped
  before the round trip, one by one.
- 429, 5xx: back off (doubling from ``flush_seconds``, at most ``MAX_BACKOFF``) and retry the
  same rows; when the answer carries ``Retry-After`` (503 while another transaction holds the
  database's lock, 429), the next try comes after what the server asked instead.
- no answer at all (the Deck is down): try again every ``PROBE_SECONDS`` at most. A refused
  connection costs neither side anything, and a Deck that comes back then hears from its runs
  (and registers the ones spooled while it was away) within seconds, not after a back-off
  grown to half a minute (issue 55).

Nothing here may hurt the training it serves (issue 55): a spool that cannot be written (a
full disk, a folder that cannot be created) keeps what waits in memory and still sends it
(``grpodeck.client.linespool``); corrupt spool lines are dropped with a warning; any other
error is one warning line and the thread goes on. The thread never raises into the script.

Between posts the thread sleeps on its queue (it wakes for a new item or the next post, never
polls). ``close(deadline, stall)`` delivers what is left for at most ``deadline`` seconds, and
(with ``stall``) gives up once nothing was delivered for ``stall`` seconds: a script ending
while the Deck is down returns at once instead of waiting out the deadline. Whatever the server
has not taken by then stays unacknowledged in the spool.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from grpodeck.client.linespool import Chunk, LineSpool, why
from grpodeck.client.retry import retry_after
from grpodeck.contract.wire import FinishedIn, IngestReply, MetricRow, RolloutStep

log = logging.getLogger("grpodeck.client")

ROWS_PER_POST = 500
_ROWS = TypeAdapter(list[MetricRow])  # the server's model over a whole batch of spooled lines
_STEPS = TypeAdapter(list[RolloutStep])
ROLLOUTS_PER_POST = 50  # captured steps per POST (and this many waiting trigger a post)
ROLLOUT_POST_BYTES = 4 * 1024 * 1024  # ... and about this many bytes (the server takes 8 MB)
ROLLOUT_SPOOL_BYTES = 512 * 1024 * 1024  # undelivered rollouts kept on disk (oldest dropped)
RUN_OVER = (401, 404, 409)  # the server no longer takes reports for this run
MIN_FLUSH_SECONDS = 0.1  # a heartbeat at most this often, a retry no sooner (never spin)
MAX_BACKOFF = 30.0
PROBE_SECONDS = 2.0  # with no answer at all, the next try comes at most this much later
CLOSING_RETRY = 2.0  # while closing, a failed post is retried at least this often

OK, REFUSED, FAILED, OVER = "ok", "refused", "failed", "over"


class RetryLater(Exception):
    """Raised by a registrar when the Deck did not register the run: try again after a
    back-off (``answered`` False: nothing answered, so probing again soon costs nothing)."""

    def __init__(self, message: str, answered: bool = False) -> None:
        super().__init__(message)
        self.answered = answered


# Registers the run: raises RetryLater to be tried again, ValueError (the Deck refused the run's
# options: trying again cannot help) to give up.
Registrar = Callable[[], "Target"]


def rollouts_path_for(spool_path: Path | None) -> Path | None:
    """Where a Sender spooling rows to ``spool_path`` spools its captured rollouts."""
    if spool_path is None:
        return None
    name = spool_path.name.removesuffix(".jsonl").removesuffix(".metrics")
    return spool_path.with_name(
        "rollouts.jsonl" if name == "metrics" else f"{name}.rollouts.jsonl")


def _loads(line: bytes) -> Any:
    """One spooled line, or None when it is not JSON (dropped like any row the wire refuses):
    bad bytes, NULs a power cut left, or nesting deeper than the parser goes."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
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
    rollouts_delivered: int = 0
    rollouts_refused: int = 0
    failures: int = 0
    last_error: str | None = None
    not_registered: str | None = None  # why registering was given up (the Deck refused it)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"


class Sender(threading.Thread):
    """Drain ``inbox`` into the spools; post unacknowledged rows and rollouts every
    ``flush_seconds`` (and as soon as ``batch_rows`` rows wait, when given).

    ``target`` None: the run is not registered yet; ``registrar`` is tried (with back-off) on
    this thread until it returns the target, while everything logged waits in the spools.
    ``spool_path`` None: there is nowhere to write (``init`` could not create its folder), so
    what waits is kept in memory only."""

    def __init__(self, target: Target | None, spool_path: Path | None, *,
                 flush_seconds: float = 2.0,
                 batch_rows: int | None = None, queue_size: int = 10_000,
                 timeout: float = 5.0, rollout_path: Path | None = None,
                 rollout_spool_bytes: int = ROLLOUT_SPOOL_BYTES,
                 registrar: Registrar | None = None) -> None:
        super().__init__(name="grpodeck-sender", daemon=True)
        self.target = target
        self.registrar = registrar
        self.timeout = timeout
        self.spool_path = Path(spool_path) if spool_path is not None else None
        self.flush_seconds = max(MIN_FLUSH_SECONDS, flush_seconds)
        self.batch_rows = batch_rows
        self.inbox: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=queue_size)
        self.state = SenderState()
        self._closing = threading.Event()
        self._stopped = threading.Event()
        self._server_wait: float | None = None  # the last failure's Retry-After, if it had one
        self._answered = True  # whether the last failure had an answer at all
        self._progress = threading.Event()  # set on each delivery (close waits on it)
        self._ended = False  # the thread has returned (set before its last _progress)
        # Held while queued items move to the spools: a full queue spools on the training
        # thread, and what is still queued must reach a spool before its (later) lines (issue
        # 31: a fast loop's spool out of step order made the server skip half of a run).
        self._order_lock = threading.RLock()
        self._queued = threading.Event()  # set after each put: the thread's wake-up
        self.rows = LineSpool(self.spool_path)
        self.rollouts = LineSpool(rollout_path or rollouts_path_for(self.spool_path),
                                  max_pending_bytes=rollout_spool_bytes, compact=True)
        self._http = self._client(target) if target is not None else None
        self._warned_drop = 0

    def _client(self, target: Target) -> httpx.Client:
        return httpx.Client(base_url=target.base_url.rstrip("/"), timeout=self.timeout,
                            headers={"Authorization": f"Bearer {target.token}"})

    # -- training thread -------------------------------------------------------------------
    def put_rows(self, rows: list[dict[str, Any]]) -> None:
        """Never blocks: a full queue (the thread is stuck on disk) spools on this thread."""
        if not rows or self.state.run_over:
            return
        try:
            self.inbox.put_nowait(("rows", rows))
        except queue.Full:
            with self._order_lock:
                self._drain()  # what was queued before these rows goes first
                self.rows.append(rows)
        self._queued.set()

    def put_rollouts(self, step: int, groups: list[dict[str, Any]]) -> None:
        """Like rows: spooled (on this thread when the queue is full), never dropped here."""
        if not groups or self.state.run_over:
            return
        line = {"step": int(step), "groups": groups, "time": round(time.time(), 3)}
        try:
            self.inbox.put_nowait(("rollouts", line))
        except queue.Full:
            with self._order_lock:
                self._drain()
                self.rollouts.append([line])
        self._queued.set()

    @property
    def rollouts_dropped(self) -> int:
        """Captured steps dropped at the rollout spool's size bound (never sent)."""
        return self.rollouts.dropped

    def close(self, deadline: float, stall: float | None = None) -> bool:
        """Deliver everything queued and spooled, for at most ``deadline`` seconds (and, with
        ``stall``, until nothing was delivered for ``stall`` seconds), then stop the thread (a
        post in flight ends on its own timeout). Whatever the server has not taken stays
        unacknowledged in the spool. True when nothing is left."""
        self._closing.set()
        self._wake()
        if self.is_alive():
            self._wait_delivered(time.monotonic() + max(0.0, deadline), stall)
        self._stopped.set()
        self._wake()
        self._settle()
        return self.state.run_over or (self.pending() == 0 and self.rollouts.pending() == 0
                                       and self.target is not None)

    def _wait_delivered(self, end: float, stall: float | None) -> None:
        """Until the thread returns, ``end``, or ``stall`` seconds pass with no delivery."""
        while not self._ended:
            left = end - time.monotonic()
            if left <= 0 or not self._progress.wait(left if stall is None else min(left, stall)):
                return
            self._progress.clear()
        self.join(timeout=max(0.0, min(1.0, end - time.monotonic())))

    def pending(self) -> int:
        """Spooled rows the server has not acknowledged."""
        return self.rows.pending()

    def _wake(self) -> None:
        try:
            self.inbox.put_nowait(("wake", None))
        except queue.Full:
            pass  # a full queue wakes the thread anyway
        self._queued.set()

    # -- this thread -----------------------------------------------------------------------
    def run(self) -> None:
        next_post = 0.0  # the first heartbeat says at once that the run is alive
        closing_seen = False
        try:
            while not self._stopped.is_set():
                self._drain()
                if self.state.run_over or self._given_up(closing_seen):
                    break
                if self._closing.is_set() and not closing_seen:
                    closing_seen, next_post = True, 0.0
                if closing_seen and self._caught_up():
                    return
                if time.monotonic() >= next_post or self._batch_due():
                    try:
                        delivered_all = self._register() and self._post_all()
                    except Exception as exc:  # noqa: BLE001 - a bug must not end reporting
                        self._unexpected(exc)
                        self._failed(repr(exc))
                        delivered_all = False
                    wait = self.flush_seconds if delivered_all else self._backoff()
                    next_post = time.monotonic() + (min(wait, CLOSING_RETRY) if closing_seen
                                                    else wait)
                    continue  # look again (closing? caught up?) before sleeping
                self._sleep_until(next_post)
        finally:
            self._settle()
            self._ended = True
            self._progress.set()

    def _unexpected(self, exc: BaseException) -> None:
        """A bug must not end reporting nor print a traceback into the training's output: one
        warning line (the traceback only with the logger at DEBUG)."""
        log.warning("grpodeck: unexpected error in the sender (%s); reporting goes on", why(exc),
                    exc_info=log.isEnabledFor(logging.DEBUG))

    def _given_up(self, closing: bool) -> bool:
        """Not registered and never will be here (no registrar, or the Deck refused it): the
        thread only spools, and stops once the run is closing."""
        unregistrable = self.target is None and (
            self.registrar is None or self.state.not_registered is not None)
        return unregistrable and (closing or self._closing.is_set())

    def _register(self) -> bool:
        """True once the run has its target; otherwise one registration attempt."""
        if self.target is not None:
            return True
        if self.registrar is None or self.state.not_registered is not None:
            return False
        try:
            target = self.registrar()
        except RetryLater as exc:
            self._failed(str(exc), answered=exc.answered)
            return False
        except ValueError as exc:  # the Deck refused the run's options: keep the spool
            self.state.not_registered = str(exc) or type(exc).__name__
            log.warning("grpodeck: the Deck refused to register the run (%s); it stays in %s",
                        self.state.not_registered, self.kept_in)
            return False
        self._http, self.target = self._client(target), target
        self._back()
        self._progress.set()
        return True

    def _caught_up(self) -> bool:
        return self.target is not None and self.rows.pending() == 0 and \
            self.rollouts.pending() == 0

    def _sleep_until(self, when: float) -> None:
        """Wait until something is queued or ``when``: no polling while idle. Items leave the
        queue only under the order lock (``_drain``), never while waiting: an item taken out
        of the lock could reach the spool after newer rows the training thread spooled."""
        if self._queued.wait(timeout=max(0.0, when - time.monotonic())):
            self._queued.clear()
            self._drain()

    def _batch_due(self) -> bool:
        if self.state.failures or self.target is None:
            return False  # backing off (or not registered): new rows wait for the next try
        return (self.batch_rows is not None and self.rows.pending() >= self.batch_rows) or \
            self.rollouts.pending() >= ROLLOUTS_PER_POST

    def _backoff(self) -> float:
        """The server's Retry-After when it gave one, else doubling from flush_seconds (at most
        PROBE_SECONDS while nothing answers at all)."""
        if self._server_wait is not None:
            return min(MAX_BACKOFF, max(MIN_FLUSH_SECONDS, self._server_wait))
        grown = self.flush_seconds * 2 ** min(self.state.failures, 5)
        return min(MAX_BACKOFF if self._answered else PROBE_SECONDS, grown)

    def _drain(self) -> None:
        """Queued items to the spools; never raises (it also runs on the training thread)."""
        with self._order_lock:
            try:
                self._drain_in_order()
            except Exception as exc:  # noqa: BLE001 - nor reach the training thread
                self._unexpected(exc)

    def _drain_in_order(self) -> None:
        rows: list[dict[str, Any]] = []
        steps: list[dict[str, Any]] = []
        item: tuple[str, Any] | None = None
        while True:
            if item is not None:
                kind, payload = item
                if kind == "rows":
                    rows.extend(payload)
                elif kind == "rollouts":
                    steps.append(payload)
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                break
        self.rows.append(rows)
        self.rollouts.append(steps)
        self._warn_dropped()

    def _warn_dropped(self) -> None:
        if self.rollouts.dropped and not self._warned_drop:
            log.warning("grpodeck: the rollout spool %s is past its bound of %d bytes; the oldest "
                        "undelivered captured steps are dropped (counted, reported at finish)",
                        self.rollouts.path, self.rollouts.max_pending_bytes or 0)
        self._warned_drop = self.rollouts.dropped

    def _settle(self) -> None:
        """Whatever is still queued goes to the spool; a run that is over has nothing left to
        send, so its spool is marked done (the supervisor's replay would only be refused)."""
        self._drain()
        if self.state.run_over:
            self.rows.ack_all()
            self.rollouts.ack_all()

    def _json(self, lines: list[bytes], adapter: TypeAdapter[Any], model: type[BaseModel],
              what: str) -> tuple[bytes, int]:
        """The lines as the body's JSON array, and how many. The spooled lines are sent as they
        were written once the server's own model accepts all of them in one pass (parsed and
        checked in pydantic-core, no Python object per row); otherwise each line is checked and
        only the items it accepts are sent."""
        joined = b"[" + b",".join(lines) + b"]"
        try:
            adapter.validate_json(joined)
            return joined, len(lines)
        except ValidationError:
            good = self._valid(model, [_loads(line) for line in lines], what)
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
            else:
                self.state.rollouts_refused += bad
        return good

    def _post_all(self) -> bool:
        """Post every unacknowledged row and captured step (an empty batch is the heartbeat).
        False on failure."""
        while not self._stopped.is_set():
            rows = self.rows.unsent(ROWS_PER_POST)
            steps = self.rollouts.unsent(ROLLOUTS_PER_POST, ROLLOUT_POST_BYTES)
            rows_json, n_rows = self._json(rows.lines, _ROWS, MetricRow, "rows")
            steps_json, n_steps = self._json(steps.lines, _STEPS, RolloutStep, "rollout steps")
            if (rows.lines or steps.lines) and not n_rows and not n_steps:
                outcome = REFUSED  # nothing left worth a round trip
            else:
                body = b'{"rows":' + rows_json
                if n_steps:
                    body += b',"rollouts":' + steps_json
                outcome = self._post(body + b"}", n_rows, n_steps)
            if outcome in (FAILED, OVER):
                return False
            self._acked(rows, steps, n_rows, n_steps, delivered=outcome == OK)
            if len(rows.lines) < ROWS_PER_POST and not self.rollouts.pending():
                return True
        return False

    def _acked(self, rows: Chunk, steps: Chunk, n_rows: int, n_steps: int,
               delivered: bool) -> None:
        self.rows.ack(rows)
        self.rollouts.ack(steps)
        self._progress.set()
        if delivered:
            self.state.rows_delivered += n_rows
            self.state.rollouts_delivered += n_steps

    def _post(self, body: bytes, n_rows: int, n_steps: int = 0) -> str:
        assert self._http is not None and self.target is not None  # registered before posting
        try:
            response = self._http.post(f"/api/runs/{self.target.run_id}/metrics", content=body,
                                       headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            return self._failed(str(exc) or type(exc).__name__, answered=False)
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
            log.warning("grpodeck: the server refused %d rows and %d rollout steps (HTTP %d: "
                        "%s); dropping them", n_rows, n_steps, status, response.text[:200])
            self.state.rows_dropped += n_rows
            self.state.rollouts_refused += n_steps
            return REFUSED
        self._reply(response)
        return OK

    def _back(self) -> None:
        if self.state.failures:
            log.warning("grpodeck: the server is back; sending what was kept")
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

    def _failed(self, reason: str, server_wait: float | None = None,
                answered: bool = True) -> str:
        self._server_wait, self._answered = server_wait, answered
        if not self.state.failures and self.target is not None:  # (init warned when unregistered)
            log.warning("grpodeck: cannot report to %s (%s); rows are kept in %s and sent when "
                        "it answers", self.target.base_url, reason, self.kept_in)
        self.state.failures += 1
        self.state.last_error = reason
        return FAILED

    @property
    def kept_in(self) -> str:
        """Where waiting rows are kept, in words: the spool file, or memory."""
        if self.rows.memory is not None or self.spool_path is None:
            return "memory (the spool cannot be written)"
        return str(self.spool_path.parent)

    # -- after close -----------------------------------------------------------------------
    def finish(self, returncode: int, error: str | None = None, attempts: int = 5,
               deadline: float | None = None) -> str | None:
        """Report how training ended; the run's final status, or None when it never arrived
        (or the run was never registered). ``deadline``: seconds to keep trying (at least one
        try), so a Deck that goes away right now cannot hold the script."""
        if self._http is None or self.target is None:
            return None
        body = FinishedIn(returncode=returncode, error=error).model_dump(mode="json")
        end = None if deadline is None else time.monotonic() + deadline
        for attempt in range(attempts):
            if attempt and end is not None and time.monotonic() >= end:
                break
            wait = min(8.0, 0.5 * 2 ** attempt)
            try:
                response = self._http.post(f"/api/runs/{self.target.run_id}/finished", json=body)
                if response.status_code < 500 and response.status_code != 429:
                    return str(response.json().get("status")) if response.is_success else None
                wait = retry_after(response) or wait  # 503 while the database is locked
            except (httpx.HTTPError, ValueError):
                pass
            if end is not None:
                wait = min(wait, max(0.0, end - time.monotonic()))
            time.sleep(wait)
        return None

    def shutdown(self) -> None:
        """Stop the thread; close the HTTP client unless a post is still in flight (then the
        daemon thread ends with it, bounded by the client's timeout)."""
        self._stopped.set()
        self._wake()
        if not self.is_alive() and self._http is not None:
            self._http.close()
