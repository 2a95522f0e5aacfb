"""A gzip bomb sent to the import upload freezes nobody (issue 33: a 9 MB bomb, 2 GiB
inflated, was refused after 21.6 s while ``/healthz`` took 21.2 s: the check ran on the event
loop). Against a live uvicorn: while the bomb is being refused, ``/healthz`` keeps answering
(bound 1 s, generous: it answers in milliseconds when the loop is free), and the bomb gets a 413
with a reason, as soon as the inflated bytes counted while streaming pass the cap."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import threading
import time
import zlib
from pathlib import Path

import httpx

from app.core.config import ROOT
from tests.stack import Stack

INFLATED = 2 * 1024**3
BLOCK = 64 * 1024**2


def gzip_member(data: bytes, repeat: int = 1) -> bytes:
    """One gzip member of ``data`` repeated ``repeat`` times (compressed once per block)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [compressor.compress(data) for _ in range(repeat)]
    return b"".join(out) + compressor.flush()


def bomb() -> bytes:
    """A tar.gz of one 2 GiB file of zeros: a tar header, then 2 GiB of zeros through gzip."""
    info = tarfile.TarInfo("run/trainer_state.json")
    info.size = INFLATED
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    return gzip_member(header) + gzip_member(bytes(BLOCK), INFLATED // BLOCK)


def test_a_gzip_bomb_is_refused_while_healthz_keeps_answering(tmp_path: Path) -> None:
    body = bomb()
    assert 1_000_000 < len(body) < 9_000_000
    stack = Stack(f"sqlite:///{tmp_path / 'grpodeck.db'}",
                  f"sqla+sqlite:///{tmp_path / 'broker.db'}", tmp_path)
    try:
        subprocess.run([sys.executable, "-m", "app.cli", "migrate"], env=stack.env, cwd=ROOT,
                       check=True, timeout=120)
        stack.start_web()
        reply: list[httpx.Response] = []

        def upload() -> None:
            reply.append(httpx.post(f"{stack.url}/api/imports", timeout=300, files={
                "archive": ("run.tar.gz", io.BytesIO(body), "application/gzip")}))

        sender = threading.Thread(target=upload)
        started = time.monotonic()
        sender.start()
        latencies = []
        with httpx.Client(base_url=stack.url, timeout=30) as client:
            while sender.is_alive() or not latencies:
                asked = time.monotonic()
                assert client.get("/healthz").status_code == 200
                latencies.append(time.monotonic() - asked)
                sender.join(timeout=0.05)
        sender.join()
        took = time.monotonic() - started
    finally:
        stack.stop()
    print(f"bomb {len(body)} bytes refused in {took:.2f} s; /healthz worst "
          f"{max(latencies) * 1000:.0f} ms over {len(latencies)} probes")
    assert max(latencies) < 1.0
    assert reply[0].status_code == 413, reply[0].text
    assert "unpacks to more than" in reply[0].json()["detail"]
