"""The test stack itself: a start that fails half-way leaves no process behind."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.stack import Stack


def test_a_failed_start_stops_what_it_spawned(tmp_path: Path) -> None:
    with socket.socket() as taken:  # the web app's port is already in use: uvicorn exits
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        stack = Stack(f"sqlite:///{tmp_path / 'grpodeck.db'}",
                      f"sqla+sqlite:///{tmp_path / 'broker.db'}", tmp_path,
                      port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="exited during start"):
            stack.start()
    assert "web" in stack.named and stack.procs == []  # spawned, then stopped and forgotten
    for proc in stack.named.values():
        assert proc.returncode is not None
        with pytest.raises(ProcessLookupError):  # nothing of its process group is left
            os.killpg(proc.pid, 0)


def test_a_stack_with_its_own_visibility_timeout_gets_its_own_redis() -> None:
    """kombu restores every queue's unacked tasks on a db older than the consumer's timeout: a
    20 s stack on the shared db 9 re-delivered other stacks' running trainings (CI flake)."""
    from tests.integration.conftest import needs_own_redis

    assert needs_own_redis(False, {"GRPODECK_BROKER_VISIBILITY_SECONDS": "20"})
    assert needs_own_redis(True, None)
    assert not needs_own_redis(False, {"GRPODECK_HEARTBEAT_SECONDS": "1"})
    assert not needs_own_redis(False, None)
