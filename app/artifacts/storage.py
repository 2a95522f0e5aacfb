"""Artifact files on the server's disk: streamed in with a size cap, checked, removed.

Why the server stores them (rather than registering a path on the worker or the client): the
worker and outside scripts may run on other machines, so their paths mean nothing here, and a
path a token holder could name on this machine would let it read any file the server can. So
every artifact is uploaded; its file lives at ``GRPODECK_ARTIFACTS_DIR/<run id>/<random>.bin``,
a name the server picks. An upload is written to disk chunk by chunk and hashed as it goes:
it is never held in memory whole.
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from app.core.config import get_settings

FLUSH_BYTES = 1024 * 1024  # write to disk (in a thread) a MiB at a time


class TooLarge(Exception):
    """The upload went past the artifact size cap."""


@dataclass(frozen=True)
class Received:
    relpath: str
    size: int
    sha256: str


def root() -> Path:
    return get_settings().artifacts_dir.resolve()


def run_dir(run_id: int) -> Path:
    return root() / str(int(run_id))


def absolute(relpath: str) -> Path:
    """The stored file for a row's ``path``; refuses anything outside the artifacts directory
    (a row is written only by ``receive``, so this is a second line of defence)."""
    base = root()
    path = (base / relpath).resolve()
    if not path.is_relative_to(base) or path == base:
        raise FileNotFoundError(relpath)
    return path


async def receive(chunks: AsyncIterator[bytes], run_id: int, limit: int) -> Received:
    """Stream ``chunks`` into a new file of the run's folder; ``TooLarge`` past ``limit`` bytes
    (the partial file is removed, as on any error)."""
    folder = run_dir(run_id)
    await anyio.to_thread.run_sync(lambda: folder.mkdir(parents=True, exist_ok=True))
    relpath = f"{int(run_id)}/{secrets.token_hex(16)}.bin"
    path = root() / relpath
    digest, size, pending = hashlib.sha256(), 0, bytearray()
    out = await anyio.to_thread.run_sync(path.open, "wb")
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the artifact is larger than {limit} bytes, the limit "
                               "(GRPODECK_ARTIFACT_MAX_BYTES)")
            digest.update(chunk)
            pending += chunk
            if len(pending) >= FLUSH_BYTES:
                data, pending = bytes(pending), bytearray()
                await anyio.to_thread.run_sync(out.write, data)
        if pending:
            await anyio.to_thread.run_sync(out.write, bytes(pending))
    except BaseException:
        out.close()
        path.unlink(missing_ok=True)
        raise
    out.close()
    return Received(relpath, size, digest.hexdigest())


def remove(relpath: str) -> None:
    try:
        absolute(relpath).unlink(missing_ok=True)
    except FileNotFoundError:
        pass


def remove_run(run_id: int) -> None:
    """After a run's deletion is committed: its whole artifacts folder."""
    folder = run_dir(run_id)
    if folder.parent == root() and folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
