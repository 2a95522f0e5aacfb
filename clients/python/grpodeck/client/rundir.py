"""The spool folder of one run reported with ``grpodeck.client.init``: everything needed to
deliver the run later, by the same process or by ``grpodeck-client sync DIR`` after it exited.

- ``run.json``: the Deck's address and the run's definition (``ExternalRunIn``: name, config,
  tags, group, alerts) and when it started, written before the first registration attempt, so
  a run whose Deck never answered can still be registered later;
- ``registered.json``: the run's id, token and page once the Deck registered it (mode 0600:
  the token lets its holder report to that run, like the spool's own rows); a second sync
  reuses it instead of registering the run twice;
- ``metrics.jsonl`` / ``rollouts.jsonl`` (and their ``.acked`` counts): the rows and captured
  steps in logging order, each with its client time stamp (``grpodeck.client.linespool``);
- ``finished.json``: how the run ended (return code, error) and whether the Deck heard it.

The API key is never written: ``sync`` takes it again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from grpodeck.contract.wire import ExternalRunIn, ExternalRunOut

RUN_FILE, REGISTERED_FILE, FINISHED_FILE = "run.json", "registered.json", "finished.json"


def _write(path: Path, data: dict[str, Any], private: bool = False) -> None:
    """Atomic JSON write (a crash leaves the old file or none); ``private``: mode 0600."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written temporary
        raise


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # missing, unreadable, not JSON (or not UTF-8)
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class RunDir:
    path: Path

    @classmethod
    def create(cls, parent: Path, url: str, body: ExternalRunIn) -> RunDir:
        """A new folder under ``parent`` named after the run and its start time."""
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", body.name).strip("-.")[:40] or "run"
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        path = Path(parent).resolve() / f"{slug}-{stamp}-{uuid.uuid4().hex[:6]}"
        path.mkdir(parents=True)
        try:
            _write(path / RUN_FILE, {"url": url, "started_at": round(time.time(), 3),
                                     "run": body.model_dump(mode="json", exclude_none=True)})
        except OSError:
            shutil.rmtree(path, ignore_errors=True)  # a folder without run.json is no spool
            raise
        return cls(path)

    def discard(self) -> None:
        """Remove the folder (``init`` raising before anything was logged)."""
        shutil.rmtree(self.path, ignore_errors=True)

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def rollouts_path(self) -> Path:
        return self.path / "rollouts.jsonl"

    def definition(self) -> tuple[str, ExternalRunIn]:
        """The Deck's address at ``init`` and the run's definition (ValueError if unreadable)."""
        data = _read(self.path / RUN_FILE)
        if data is None:
            raise ValueError(f"{self.path / RUN_FILE} is missing or not JSON")
        try:
            return str(data.get("url") or ""), ExternalRunIn.model_validate(data.get("run"))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"{self.path / RUN_FILE} is not a run definition "
                             f"({'.'.join(map(str, err['loc']))}: {err['msg']})") from None

    def registration(self) -> ExternalRunOut | None:
        """The Deck's registration, None before it; ValueError (one line) when the file is
        not one this client wrote: registering again could make a second run."""
        data = _read(self.path / REGISTERED_FILE)
        try:
            return ExternalRunOut.model_validate(data) if data else None
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"{self.path / REGISTERED_FILE} is not a registration "
                             f"({'.'.join(map(str, err['loc']))}: {err['msg']}); if the Deck "
                             "never registered this run, remove the file and sync again"
                             ) from None

    def save_registration(self, info: ExternalRunOut) -> None:
        _write(self.path / REGISTERED_FILE, info.model_dump(mode="json"), private=True)

    def save_finish(self, returncode: int, error: str | None, sent: bool = False) -> None:
        _write(self.path / FINISHED_FILE, {"returncode": returncode, "error": error,
                                           "sent": sent})

    def finish(self) -> dict[str, Any] | None:
        """How the run ended (``returncode``, ``error``, ``sent``), or None while it runs."""
        return _read(self.path / FINISHED_FILE)


def find(folder: Path) -> list[RunDir]:
    """``folder`` itself when it is a run's spool, else the run spools directly inside it."""
    folder = Path(folder)
    if (folder / RUN_FILE).is_file():
        return [RunDir(folder)]
    if not folder.is_dir():
        return []
    return [RunDir(p) for p in sorted(folder.iterdir()) if (p / RUN_FILE).is_file()]
