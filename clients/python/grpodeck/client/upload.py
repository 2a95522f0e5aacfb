"""Upload a training log to a Deck over HTTP (``POST /api/imports``, API key): what
``grpodeck-client import`` and ``grpodeck import --url`` do on a node with no database access.

A file goes as it is; a folder (a TRL output dir with checkpoints and completions) as a tar.gz
built in memory, so the server reads it with the same readers as a local ``grpodeck import``.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import httpx

# A run folder's weights are not needed to read its log, and make the archive huge.
SKIPPED_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt")
KEPT_BINARIES = ("training_args.bin",)  # TRL's saved arguments: the run's settings


class UploadError(RuntimeError):
    """The Deck refused the upload; the message is its reason."""


def _wanted(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    name = info.name.rsplit("/", 1)[-1]
    if info.isfile() and name.endswith(SKIPPED_SUFFIXES) and name not in KEPT_BINARIES:
        return None
    return info


def folder_archive(folder: Path) -> bytes:
    """``folder`` as a tar.gz whose single top-level entry is the folder (its name names the
    run), without model weights."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.resolve().name, filter=_wanted)
    return buffer.getvalue()


def upload_log(url: str, api_key: str | None, path: Path, name: str | None = None,
               mapping: list[str] | None = None, timeout: float = 300,
               save_map: bool = False) -> list[dict[str, Any]]:
    """Import ``path`` (a log file, a trackio or MLflow .db, or a run folder) on the Deck at
    ``url``; the imported runs (``id``, ``name``, ``verdict``, ``url``). ``save_map``: the Deck
    remembers ``mapping`` for the caller's next log of this file (or folder) name, as a local
    ``--save-map`` does. Raises UploadError."""
    if path.is_dir():
        files = {"archive": (f"{path.resolve().name}.tar.gz", folder_archive(path),
                             "application/gzip")}
    else:
        files = {"log": (path.name, path.read_bytes(), "application/octet-stream")}
    data: dict[str, Any] = {"map": list(mapping or [])}
    if name:
        data["name"] = name
    if save_map:
        data["save_map"] = "true"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.post(f"{url.rstrip('/')}/api/imports", files=files, data=data,
                              headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise UploadError(f"could not reach {url}: {exc}") from None
    if response.status_code != 201:
        raise UploadError(f"rejected ({response.status_code}): {_detail(response)}")
    return response.json()["runs"]


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:500]
    return detail if isinstance(detail, str) else str(detail)[:500]
