"""The test stack itself: a start that fails half-way leaves no process behind."""

from __future__ import annotations

import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.stack import Stack, listens


def test_a_failed_start_stops_what_it_spawned(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:  # the web app's port is in use on every try: uvicorn exits
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setattr("tests.stack.free_port", lambda: taken.getsockname()[1])
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


class _Healthy(BaseHTTPRequestHandler):
    """Another stack's server: answers every GET with 200."""

    def do_GET(self) -> None:  # http.server names it
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_: object) -> None:
        pass


def test_a_port_taken_by_another_server_is_not_mistaken_for_this_stack(tmp_path: Path) -> None:
    """The picked port taken (and answering /healthz) before this stack's web app binds it: the
    stack moves to another port instead of sending its tests to the other server."""
    other = ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    taken = other.server_address[1]
    stack = Stack(f"sqlite:///{tmp_path / 'deck.db'}", f"sqla+sqlite:///{tmp_path / 'b.db'}",
                  tmp_path, port=taken)
    try:
        stack.start()
        assert stack.port != taken
        assert listens(stack.named["web"].pid, stack.port)
        assert "address already in use" in stack.log("web")
    finally:
        stack.stop()
        other.shutdown()
