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

Captured rollouts (see ``worker.training.rollouts``) ride in the same batches: the body becomes
``{"rows": [...], "rollouts": [{"step": int, "groups": [...]}]}`` (the key only when there are
some). They are flushed with the rows, never spooled, and at most ``MAX_BUFFERED_ROLLOUT_STEPS``
steps wait during an outage (oldest dropped): they are samples, not the record.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

log = logging.getLogger(__name__)

MAX_BUFFERED_ROWS = 50_000  # beyond this, a long outage drops the oldest rows rather than OOM
MAX_BACKOFF_SECONDS = 60.0
MAX_BUFFERED_ROLLOUT_STEPS = 50
ROLLOUT_STEPS_PER_FLUSH = 5  # flush early once this many captured steps wait: bounds POST size


def encode_value(value: Any) -> float | str | None:
    """A JSON-safe metric value, or None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:  # numpy / torch scalars
            value = float(value.item())  # type: ignore[union-attr]
        except (AttributeError, TypeError, ValueError):
            return None
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def rows_from_logs(step: int, logs: dict[str, Any]) -> list[dict[str, Any]]:
    """Split one ``on_log`` dict into a train row and an eval row (each only if non-empty)."""
    train: dict[str, Any] = {}
    evals: dict[str, Any] = {}
    for name, raw in logs.items():
        value = encode_value(raw)
        if value is not None:
            (evals if name.startswith("eval_") else train)[name] = value
    return [{"step": step, "metrics": m} for m in (train, evals) if m]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and (
        exc.response.status_code >= 500 or exc.response.status_code == 429)


class MetricsReporter(TrainerCallback):
    """POST metric rows in batches to ``{report_url}/api/runs/{run_id}/metrics``."""

    def __init__(self, report_url: str, run_id: int | str, token: str, batch_rows: int = 20,
                 flush_seconds: float = 5.0, timeout: float = 10.0, attempts: int = 3,
                 spool_path: str | Path | None = None) -> None:
        self.url = f"{report_url.rstrip('/')}/api/runs/{run_id}/metrics"
        self.batch_rows = batch_rows
        self.flush_seconds = flush_seconds
        self.attempts = attempts
        self.spool_path = Path(spool_path) if spool_path else None
        self.stop_requested = False
        self.rows_sent = 0
        self.failures = 0
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

    def _post(self, rows: list[dict[str, Any]], rollouts: list[dict[str, Any]] | None = None) -> Any:
        body: dict[str, Any] = {"rows": rows}
        if rollouts:
            body["rollouts"] = rollouts
        for attempt in Retrying(stop=stop_after_attempt(self.attempts), reraise=True,
                                wait=wait_exponential(multiplier=0.5, max=4),
                                retry=retry_if_exception(_retryable)):
            with attempt:
                response = self._client.post(self.url, json=body)
                response.raise_for_status()
                return response.json() if response.content else {}
        raise AssertionError("unreachable")

    def flush(self, control: TrainerControl | None = None, force: bool = False) -> bool:
        """Send buffered rows (possibly none: a heartbeat). Returns True when the server answered."""
        now = time.monotonic()
        if not force and now < self._not_before:
            return False
        self._last_flush = now
        rows, rollouts = self._buffer[:], self._rollouts[:]
        try:
            answer = self._post(rows, rollouts)
        except httpx.HTTPStatusError as exc:
            if _retryable(exc):
                return self._failed(exc, now)
            # 4xx: the server refuses these rows; resending them would fail forever.
            log.warning("metrics server rejected %d rows (%s); dropping them", len(rows), exc)
            del self._buffer[:len(rows)]
            del self._rollouts[:len(rollouts)]
            return False
        except (httpx.HTTPError, ValueError) as exc:
            return self._failed(exc, now)
        del self._buffer[:len(rows)]
        del self._rollouts[:len(rollouts)]
        self.rows_sent += len(rows)
        self.failures = 0
        self._not_before = 0.0
        if isinstance(answer, dict) and answer.get("stop"):
            if not self.stop_requested:
                log.warning("server asked this run to stop; stopping after this step")
            self.stop_requested = True
        if self.stop_requested and control is not None:
            control.should_training_stop = True
        return True

    def _failed(self, exc: BaseException, now: float) -> bool:
        self.failures += 1
        backoff = min(MAX_BACKOFF_SECONDS, self.flush_seconds * 2 ** (self.failures - 1))
        self._not_before = now + backoff
        if len(self._buffer) > MAX_BUFFERED_ROWS:
            del self._buffer[: len(self._buffer) - MAX_BUFFERED_ROWS]
        log.warning("could not report metrics to %s (%s); %d rows kept, retrying in %.0f s",
                    self.url, exc, len(self._buffer), backoff)
        return False

    # -- Trainer callbacks ------------------------------------------------------------------
    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        rows = rows_from_logs(state.global_step, logs)
        self._buffer.extend(rows)
        if self.spool_path is not None:
            with self.spool_path.open("a") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
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
        if not self.flush(force=True) and self._buffer:
            log.warning("training ended with %d metric rows the server never received", len(self._buffer))

    def close(self) -> None:
        self._client.close()
