"""Fixtures for worker tests: a real HTTP receiver standing in for the GRPO Deck server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Receiver:
    """Records every POST; answers ``{"accepted": n, "stop": self.stop}`` (or ``status``)."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    stop: bool = False
    status: int = 200
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def rows(self) -> list[dict[str, Any]]:
        with self.lock:
            return [row for r in self.requests for row in r["body"]["rows"]]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with rec.lock:
                rec.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            payload = json.dumps({"accepted": len(body.get("rows", [])), "stop": rec.stop}).encode()
            self.send_response(rec.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
