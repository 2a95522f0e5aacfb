"""Fixtures for worker tests: a real HTTP receiver standing in for the GRPO Deck server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Receiver:
    """Records every POST; answers ``{"accepted": n, "stop": self.stop}`` (or ``status``).

    ``hold``: while this event is clear, every request is kept open (recorded, unanswered)
    until the test sets it; ``holding`` counts the requests waiting so. ``refuse``: a body for
    which it answers 422 instead."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    stop: bool = False
    status: int = 200
    hold: threading.Event | None = None
    holding: int = 0
    refuse: Callable[[dict[str, Any]], bool] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def rows(self) -> list[dict[str, Any]]:
        with self.lock:
            return [row for r in self.requests for row in r["body"]["rows"]]

    @property
    def delivered(self) -> list[dict[str, Any]]:
        """The rows of the requests it answered with a 2xx."""
        with self.lock:
            return [row for r in self.requests if 200 <= r.get("status", 0) < 300
                    for row in r["body"]["rows"]]


@contextmanager
def serve(port: int = 0) -> Iterator[Receiver]:
    """A receiver on ``port`` (0: any free one), up for the block."""
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            record = {"path": self.path, "headers": dict(self.headers), "body": body}
            with rec.lock:
                rec.requests.append(record)
            hold = rec.hold
            if hold is not None and not hold.is_set():
                with rec.lock:
                    rec.holding += 1
                hold.wait()
                with rec.lock:
                    rec.holding -= 1
            status = 422 if rec.refuse is not None and rec.refuse(body) else rec.status
            record["status"] = status
            payload = json.dumps({"accepted": len(body.get("rows", [])), "stop": rec.stop}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        if rec.hold is not None:
            rec.hold.set()  # let held requests end
        server.shutdown()
        server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serve() as rec:
        yield rec
