"""The Celery task's side of the report API: claim a run, poll for stop, report the end.

Retries are bounded (tenacity): the web app restarting for a few seconds must not fail a run,
but a dead web app must not hang the worker forever either.
"""

from __future__ import annotations

from typing import Any

import httpx
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

RETRYABLE = (httpx.TransportError, httpx.RemoteProtocolError)


class RunConflict(Exception):
    """The server refused a status change (e.g. the run was cancelled while queued)."""


class RunClient:
    def __init__(self, base_url: str, run_id: int, token: str, timeout: float = 10.0) -> None:
        self.run_id = run_id
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    @retry(retry=retry_if_exception_type(RETRYABLE), stop=stop_after_attempt(5),
           wait=wait_exponential(multiplier=0.5, max=8), reraise=True)
    def _call(self, method: str, path: str, json: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self._http.request(method, f"/api/runs/{self.run_id}/{path}", json=json)
        if response.status_code == 409:
            raise RunConflict(response.json().get("detail", "conflict"))
        response.raise_for_status()
        return response.json()

    def started(self, pid: int, host: str) -> dict[str, Any]:
        return self._call("POST", "started", {"pid": pid, "host": host})

    def control(self) -> dict[str, Any]:
        return self._call("GET", "control")

    def finished(self, returncode: int, error: str | None, traceback_tail: str | None) -> None:
        self._call("POST", "finished", {"returncode": returncode, "error": error,
                                        "traceback_tail": traceback_tail})

    def close(self) -> None:
        self._http.close()
