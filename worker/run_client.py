"""The Celery task's side of the report API: claim a run, poll for stop, replay, report the end.

Claiming trades the single-use ticket from the task message for the run's token. Calls that must
arrive (claim, replay, the final status) retry with backoff for up to ``deadline`` seconds
(tenacity): the web app restarting, or down for a minute at the end of a run, must not lose a
run's end, but a dead web app must not hang the worker forever either. The control poll is a
single attempt: a missed poll is simply "no answer yet". Bodies and replies are the contract's
(``grpodeck.contract.wire``), the same models the server validates them with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from grpodeck.client.artifacts import packed, send
from grpodeck.client.retry import retry_after
from grpodeck.contract.artifacts import ArtifactOut
from grpodeck.contract.wire import (
    ClaimOut,
    ControlOut,
    FinishedIn,
    LogBatch,
    MetricBatch,
    MetricRow,
    RolloutStep,
    StartedIn,
)

# The server says the run is over for this worker: cancelled while queued, already claimed,
# ended (its token revoked), or gone.
OVER = (401, 404, 409)
UPLOAD_TIMEOUT_S = 120.0  # per read/write of a checkpoint upload (not the whole transfer)


class RunConflict(Exception):
    """The server refused: the run is no longer this worker's to train or report."""


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and (
        exc.response.status_code >= 500 or exc.response.status_code == 429)


_BACKOFF = wait_exponential(multiplier=0.5, max=10)


def server_wait(state: RetryCallState) -> float:
    """The server's Retry-After (503 while the database is locked, 429) when it sent one,
    else exponential backoff."""
    exc = state.outcome.exception() if state.outcome is not None else None
    if isinstance(exc, httpx.HTTPStatusError):
        asked = retry_after(exc.response)
        if asked is not None:
            return asked
    return _BACKOFF(state)


class RunClient:
    def __init__(self, base_url: str, run_id: int, deadline: float = 300.0,
                 timeout: float = 10.0) -> None:
        self.run_id = run_id
        self.deadline = deadline
        self.marker_key: str | None = None  # from the claim
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)

    def _once(self, method: str, path: str, body: BaseModel | None = None) -> dict[str, Any]:
        json = body.model_dump(mode="json") if body is not None else None
        response = self._http.request(method, f"/api/runs/{self.run_id}/{path}", json=json)
        if response.status_code in OVER:
            raise RunConflict(f"{response.status_code}: {response.text[:300]}")
        response.raise_for_status()
        return response.json()

    def _call(self, method: str, path: str, body: BaseModel | None = None) -> dict[str, Any]:
        for attempt in Retrying(retry=retry_if_exception(retryable), reraise=True,
                                stop=stop_after_delay(self.deadline),
                                wait=server_wait):
            with attempt:
                return self._once(method, path, body)
        raise AssertionError("unreachable")

    def claimable(self, ticket: str) -> bool:
        """Whether a claim with ``ticket`` would succeed now, spending nothing; one attempt:
        True also when the server cannot say (unreachable, 5xx), since only its "no" ends a
        wait for a device slot."""
        try:
            reply = self._http.get(f"/api/runs/{self.run_id}/claim",
                                   headers={"Authorization": f"Bearer {ticket}"})
        except httpx.TransportError:
            return True
        return reply.status_code not in OVER

    def claim(self, ticket: str, pid: int, host: str) -> str:
        """Start the run; returns its token (kept in memory, handed to the child's environment)."""
        self._http.headers["Authorization"] = f"Bearer {ticket}"
        reply = ClaimOut.model_validate(self._call("POST", "claim", StartedIn(pid=pid, host=host)))
        self._http.headers["Authorization"] = f"Bearer {reply.token}"
        self.marker_key = reply.marker_key  # signs the rank lines; never given to the child
        return reply.token

    def control(self) -> ControlOut:
        return ControlOut.model_validate(self._once("GET", "control"))

    def report(self, rows: list[dict[str, Any]]) -> None:
        self._call("POST", "metrics",
                   MetricBatch(rows=[MetricRow.model_validate(r) for r in rows]))

    def report_rollouts(self, steps: list[dict[str, Any]]) -> None:
        """Captured steps (the rollout spool's lines) in one batch without rows."""
        self._call("POST", "metrics",
                   MetricBatch(rollouts=[RolloutStep.model_validate(s) for s in steps]))

    def logs(self, batch: LogBatch) -> None:
        """One attempt (the shipper sends again on its next call)."""
        self._once("POST", "logs", batch)

    def upload_artifact(self, path: Path, kind: str, step: int | None) -> ArtifactOut:
        """Pack once, then send with the same retries as the run's end (a restarting web app
        must not lose a checkpoint); a refusal (4xx) raises at once."""
        with packed(path) as (file, name):
            for attempt in Retrying(retry=retry_if_exception(retryable), reraise=True,
                                    stop=stop_after_delay(self.deadline), wait=server_wait):
                with attempt:
                    return send(self._http, self.run_id, file, name, kind, step,
                                timeout=UPLOAD_TIMEOUT_S)
        raise AssertionError("unreachable")

    def finished(self, returncode: int, error: str | None, traceback_tail: str | None) -> None:
        self._call("POST", "finished", FinishedIn(returncode=returncode, error=error,
                                                  traceback_tail=traceback_tail))

    def close(self) -> None:
        self._http.close()
