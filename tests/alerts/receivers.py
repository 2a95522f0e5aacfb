"""Real receivers on loopback: an HTTP server (webhooks, Apprise json://) and an SMTP server
(aiosmtpd, for Apprise mailto://)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Message as MessageHandler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Received:
    path: str
    body: dict[str, Any]
    at: float  # time.time() when it arrived


@dataclass
class HttpReceiver:
    """Records every POST. ``fail_first[path]`` answers 500 that many times first;
    ``hang`` (paths) never answers until ``release`` is set; ``redirect[path]`` answers 307
    to that URL (the outbound URL policy must not follow it to a refused address)."""

    fail_first: dict[str, int] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    redirect: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)
    hanging: int = 0
    delay: float = 0.0  # seconds before answering (a slow receiver)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r.body for r in self.received if r.path == path]

    def wait_for(self, check: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; got {self.received}")


def start_http(receiver: HttpReceiver) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            with receiver.lock:
                receiver.attempts.append(path)
                failing = receiver.fail_first.get(path, 0)
                if failing:
                    receiver.fail_first[path] = failing - 1
            if path in receiver.redirect:
                self.send_response(307)
                self.send_header("Location", receiver.redirect[path])
                self.end_headers()
                return
            if path in receiver.hang:
                with receiver.lock:
                    receiver.hanging += 1
                receiver.release.wait(120)
                return
            time.sleep(receiver.delay)
            if failing:
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"planned failure")
                return
            with receiver.lock:
                receiver.received.append(Received(path, json.loads(raw or b"{}"), time.time()))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Mailbox(MessageHandler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[Message] = []

    def handle_message(self, message: Message) -> None:
        self.messages.append(message)


def start_smtp() -> tuple[Controller, Mailbox]:
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    return controller, box


@contextmanager
def running_receiver(hang: set[str] | None = None) -> Iterator[HttpReceiver]:
    """A loopback HTTP receiver for the duration of the block (``hang``: paths never answered
    until it closes)."""
    box = HttpReceiver(hang=hang or set())
    server = start_http(box)
    try:
        yield box
    finally:
        box.release.set()
        server.shutdown()
        server.server_close()
