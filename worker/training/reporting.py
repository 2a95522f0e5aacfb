"""Stream the trainer's logged metrics to the GRPO Deck server, and obey its stop requests.

The server's answer to every POST carries ``stop``: that is how a user's cancel or a guard-rail
reaches a training process that has no other channel back. So besides batching metric rows we
also "heartbeat" (POST an empty batch) every ``flush_seconds`` from ``on_step_end``.

Rows are ``{"step": global_step, "metrics": {name: value}}``. Eval logs (``eval_*`` keys) go in
their own row with the same step; the server merges rows by (run, step, name). The end-of-training
summary TRL/transformers logs (``train_runtime``, ``train_loss``, ...) is sent too, as a row at the
final step: it is cheap and the dashboard can show it. Non-finite floats are sent as the strings
"nan", "inf", "-inf" (JSON can't carry them); ``None`` (TRL's "no valid value") and non-numbers are
dropped. Reporting never crashes training: failed POSTs are retried a few times, then the rows
stay buffered for the next flush and a warning is logged.

The end of training is different: nothing comes after it, so ``on_train_end`` keeps trying, with
backoff, for up to ``report_deadline`` seconds until every buffered row is delivered. Every row
is also appended to the spool (``worker.spool``) before it is sent, and acknowledged there once
the server took it; whatever is still unacknowledged when the child exits is replayed by the
supervisor. A 401/404/409 answer means the run is over on the server (ended, lost, token
revoked): training stops and nothing more is sent.

Captured rollouts (see ``worker.training.rollouts``) ride in the same batches: the body becomes
``{"rows": [...], "rollouts": [{"step": int, "groups": [...]}]}`` (the key only when there are
some). They are flushed with the rows, never spooled, and at most ``MAX_BUFFERED_ROLLOUT_STEPS``
steps wait during an outage (oldest dropped): they are samples, not the record.

Bodies are built with the contract's ``MetricBatch`` (``grpodeck.contract.wire``), the model the
server validates them with; a batch it refuses is refused here without the round trip (dropped
with a warning, as a 422 would be), and the reply is read as ``IngestReply``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError
from tenacity import (
    Retrying,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from grpodeck.client import spool
from grpodeck.client.callback import encode_value, rows_from_logs  # noqa: F401  (one definition)
from grpodeck.contract.wire import IngestReply, MetricBatch

log = logging.getLogger(__name__)

MAX_BUFFERED_ROWS = 50_000  # beyond this, a long outage drops the oldest rows rather than OOM
MAX_BACKOFF_SECONDS = 60.0
MAX_BUFFERED_ROLLOUT_STEPS = 50
ROLLOUT_STEPS_PER_FLUSH = 5  # flush early once this many captured steps wait: bounds POST size
MAX_ROWS_PER_POST = 500  # after an outage the backlog goes out in several bounded POSTs
RUN_OVER = (401, 404, 409)  # the server no longer takes reports for this run


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and (
        exc.response.status_code >= 500 or exc.response.status_code == 429)


def _reply(response: httpx.Response) -> IngestReply | None:
    """The server's answer; None when it carries none we can read (then: no stop request)."""
    if not response.content:
        return None
    try:
        return IngestReply.model_validate(response.json())
    except ValidationError:
        return None


class MetricsReporter(TrainerCallback):
    """POST metric rows in batches to ``{report_url}/api/runs/{run_id}/metrics``."""

    def __init__(self, report_url: str, run_id: int | str, token: str, batch_rows: int = 20,
                 flush_seconds: float = 5.0, timeout: float = 10.0, attempts: int = 3,
                 spool_path: str | Path | None = None, report_deadline: float = 300.0) -> None:
        self.url = f"{report_url.rstrip('/')}/api/runs/{run_id}/metrics"
        self.batch_rows = batch_rows
        self.flush_seconds = flush_seconds
        self.attempts = attempts
        self.report_deadline = report_deadline
        self.spool_path = Path(spool_path) if spool_path else None
        self.stop_requested = False
        self.run_over = False
        self.rows_sent = 0
        self.failures = 0
        self._acked = 0  # leading spool lines the server has taken (or refused for good)
        self._gap = False  # rows were dropped from memory: the spool's replay must cover them
        self._buffer: list[dict[str, Any]] = []
        self._rollouts: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()
        self._not_before = 0.0  # after failures, wait before the next attempt (don't stall steps)
        self._client = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {token}"})

    # -- HTTP -------------------------------------------------------------------------------
    def add_rollouts(self, step: int, groups: list[dict[str, Any]]) -> None:
        """Queue one captured step's groups; they go out with the next flush."""
        if groups:
            self._rollouts.append({"step": int(step), "groups": groups})
            del self._rollouts[:-MAX_BUFFERED_ROLLOUT_STEPS]

    def _post(self, rows: list[dict[str, Any]],
              rollouts: list[dict[str, Any]] | None = None) -> IngestReply | None:
        body = MetricBatch(rows=rows, rollouts=rollouts or []).model_dump(
            mode="json", exclude=None if rollouts else {"rollouts"})
        for attempt in Retrying(stop=stop_after_attempt(self.attempts), reraise=True,
                                wait=wait_exponential(multiplier=0.5, max=4),
                                retry=retry_if_exception(_retryable)):
            with attempt:
                response = self._client.post(self.url, json=body)
                response.raise_for_status()
                return _reply(response)
        raise AssertionError("unreachable")

    def flush(self, control: TrainerControl | None = None, force: bool = False) -> bool:
        """Send buffered rows (possibly none: a heartbeat) in bounded POSTs. Returns True when
        the server took everything that was buffered."""
        now = time.monotonic()
        if self.run_over or (not force and now < self._not_before):
            return False
        self._last_flush = now
        while True:
            rows, rollouts = self._buffer[:MAX_ROWS_PER_POST], self._rollouts[:]
            try:
                answer = self._post(rows, rollouts)
            except ValidationError as exc:  # what the server would refuse with a 422
                self._invalid(exc, len(rows), len(rollouts))
                if not self._buffer:
                    return False
                continue
            except httpx.HTTPStatusError as exc:
                if _retryable(exc):
                    return self._failed(exc, now)
                self._refused(exc, len(rows), len(rollouts))
                if self.run_over and control is not None:
                    control.should_training_stop = True
                if self.run_over or not self._buffer:
                    return False
                continue
            except (httpx.HTTPError, ValueError) as exc:
                return self._failed(exc, now)
            self._delivered(len(rows), len(rollouts))
            if answer is not None and answer.stop:
                if not self.stop_requested:
                    log.warning("server asked this run to stop; stopping after this step")
                self.stop_requested = True
            if not self._buffer:
                break
        if self.stop_requested and control is not None:
            control.should_training_stop = True
        return True

    def _delivered(self, n_rows: int, n_rollouts: int) -> None:
        del self._buffer[:n_rows]
        del self._rollouts[:n_rollouts]
        self.rows_sent += n_rows
        self.failures = 0
        self._not_before = 0.0
        self._ack(n_rows)

    def _refused(self, exc: httpx.HTTPStatusError, n_rows: int, n_rollouts: int) -> None:
        """4xx: resending would fail forever. 401/404/409: the run is over on the server."""
        if exc.response.status_code in RUN_OVER:
            log.warning("the server no longer takes reports for this run (%s); stopping", exc)
            self.run_over = self.stop_requested = True
            n_rows, n_rollouts = len(self._buffer), len(self._rollouts)
        else:
            log.warning("metrics server rejected %d rows (%s); dropping them", n_rows, exc)
        del self._buffer[:n_rows]
        del self._rollouts[:n_rollouts]
        self._ack(n_rows)

    def _invalid(self, exc: ValidationError, n_rows: int, n_rollouts: int) -> None:
        """A batch outside the wire format: resending would fail forever, so drop it."""
        log.warning("dropping %d rows the server would refuse: %s", n_rows,
                    str(exc).splitlines()[0])
        del self._buffer[:n_rows]
        del self._rollouts[:n_rollouts]
        self._ack(n_rows)

    def _ack(self, n_rows: int) -> None:
        if self.spool_path is None or self._gap:
            return
        self._acked += n_rows
        spool.mark_acked(self.spool_path, self._acked)

    def deliver_all(self) -> bool:
        """Keep flushing, with backoff, until every row is delivered or the deadline passes."""
        if not self._buffer and not self._rollouts:
            return True
        done = Retrying(stop=stop_after_delay(self.report_deadline),
                        wait=wait_exponential(multiplier=0.5, max=10),
                        retry=retry_if_result(lambda ok: not ok),
                        retry_error_callback=lambda _state: False)
        return bool(done(lambda: self.flush(force=True) or self.run_over))

    def _failed(self, exc: BaseException, now: float) -> bool:
        self.failures += 1
        backoff = min(MAX_BACKOFF_SECONDS, self.flush_seconds * 2 ** (self.failures - 1))
        self._not_before = now + backoff
        if len(self._buffer) > MAX_BUFFERED_ROWS:  # the spool keeps them; its replay resends
            del self._buffer[: len(self._buffer) - MAX_BUFFERED_ROWS]
            self._gap = True
        log.warning("could not report metrics to %s (%s); %d rows kept, retrying in %.0f s",
                    self.url, exc, len(self._buffer), backoff)
        return False

    # -- Trainer callbacks ------------------------------------------------------------------
    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        rows = rows_from_logs(state.global_step, logs)
        if self.spool_path is not None:
            spool.append(self.spool_path, rows)
        self._buffer.extend(rows)
        due = time.monotonic() - self._last_flush >= self.flush_seconds
        many = len(self._buffer) >= self.batch_rows or len(self._rollouts) >= ROLLOUT_STEPS_PER_FLUSH
        if many or due:
            self.flush(control)
        elif self.stop_requested:
            control.should_training_stop = True

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        if time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush(control)  # heartbeat: learn about stop requests between logging steps
        if self.stop_requested:
            control.should_training_stop = True

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        if not self.deliver_all() and not self.run_over:
            log.warning("training ended with %d metric rows the server never received; the "
                        "supervisor replays them from the spool", len(self._buffer))

    def close(self) -> None:
        self._client.close()
