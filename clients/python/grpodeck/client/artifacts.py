"""Upload a file or a folder a run saved (a checkpoint, the final model) to its Deck.

A folder travels as one uncompressed tar (written to a temporary file first, then streamed):
one request per checkpoint keeps the listing one row per checkpoint, keeps its files together
for the download, and lets the server check every member path once; no compression because
weights do not compress and a checkpoint's size is what the disk can spare, not the memory.
A file travels as it is. Neither is ever read into memory whole.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from grpodeck.contract.artifacts import KINDS, TAR_SUFFIX, ArtifactOut, name_problem

CHUNK = 1024 * 1024


class ArtifactError(RuntimeError):
    """The artifact cannot be sent (a bad name or kind), or the Deck refused it."""


def _regular_only(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Files and folders only: a link would point somewhere on this machine (and the server
    refuses tars holding one)."""
    return info if info.isfile() or info.isdir() else None


@contextmanager
def packed(path: Path, name: str | None = None) -> Iterator[tuple[Path, str]]:
    """(the file to send, its artifact name): a folder as ``NAME.tar`` in a temporary file
    (removed afterwards), a file as it is."""
    path = Path(path)
    if path.is_dir():
        folder = path.resolve()
        name = name or f"{folder.name}{TAR_SUFFIX}"
        fd, tmp = tempfile.mkstemp(suffix=TAR_SUFFIX, prefix="grpodeck-artifact-")
        os.close(fd)
        try:
            with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
                tar.add(folder, arcname=folder.name, filter=_regular_only)
            yield Path(tmp), name
        finally:
            Path(tmp).unlink(missing_ok=True)
    elif path.is_file():
        yield path, name or path.name
    else:
        raise ArtifactError(f"{path} is neither a file nor a folder")


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            yield block


def check(name: str, kind: str) -> None:
    if (problem := name_problem(name)) is not None:
        raise ArtifactError(f"{name[:200]!r}: {problem}")
    if kind not in KINDS:
        raise ArtifactError(f"kind {kind!r}: one of {', '.join(KINDS)}")


def send(http: httpx.Client, run_id: int, file: Path, name: str, kind: str,
         step: int | None = None, timeout: float | None = None) -> ArtifactOut:
    """One streamed ``POST /api/runs/{id}/artifacts`` (``http`` carries the base URL and the
    run token). Raises ``httpx.HTTPStatusError`` on a refusal (the caller decides on retries)."""
    check(name, kind)
    params: dict[str, str | int] = {"name": name, "kind": kind}
    if step is not None:
        params["step"] = int(step)
    headers = {"Content-Type": "application/octet-stream",
               "Content-Length": str(file.stat().st_size)}  # not chunked: the cap is checked first
    response = http.post(f"/api/runs/{run_id}/artifacts", params=params, headers=headers,
                         content=_chunks(file),
                         timeout=timeout if timeout is not None else http.timeout)
    response.raise_for_status()
    return ArtifactOut.model_validate(response.json())


def upload(http: httpx.Client, run_id: int, path: Path, *, kind: str = "file",
           step: int | None = None, name: str | None = None) -> ArtifactOut:
    """Pack (a folder) and send ``path``; ``ArtifactError`` with the Deck's reason on a 4xx."""
    with packed(path, name) as (file, artifact_name):
        try:
            return send(http, run_id, file, artifact_name, kind, step,
                        timeout=None)
        except httpx.HTTPStatusError as exc:
            raise ArtifactError(f"the Deck refused {artifact_name} "
                                f"({exc.response.status_code}): {exc.response.text[:500]}"
                                ) from None
