"""The liveness beacon both long-lived background processes publish (``heartbeats`` table).

The scheduler writes its heartbeat to the database it already uses; a worker, which holds no
database credentials, posts one to the web app (``HEARTBEAT_PATH``) with the deployment's shared
worker secret (``GRPODECK_WORKER_SECRET``) as a bearer token. The web app shows a banner and
``/healthz?strict=1`` answers 503 once they fall silent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from grpodeck.contract.limits import MAX_INT32

HEARTBEAT_PATH = "/api/workers/heartbeat"
DEFAULT_HEARTBEAT_SECONDS = 10.0
ProcessKind = Literal["scheduler", "worker"]
KINDS: tuple[ProcessKind, ...] = ("scheduler", "worker")


class Heartbeat(BaseModel):
    """One beat: which process (a stable name across restarts), on which host, with which pid."""

    name: str = Field(min_length=1, max_length=200)
    host: str = Field("", max_length=200)
    pid: int = Field(0, ge=0, le=MAX_INT32)  # heartbeats.pid is a 32-bit column
