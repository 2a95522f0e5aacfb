"""The app behind a real uvicorn in this process, for tests that need real HTTP (parallel
uploads, a CLI's ``--url``) on the database the ``app_db`` fixture set up."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn


@contextmanager
def served_app(backlog: int = 16) -> Iterator[str]:
    """Its base URL. The socket is bound and listening before the server starts, so early
    connections wait in its backlog: there is nothing to poll for."""
    from app.main import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    served = uvicorn.Server(uvicorn.Config(create_app(), lifespan="off", log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=served.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        served.should_exit = True
        thread.join(timeout=30)
        sock.close()
