"""Run artifacts on the wire: what a checkpoint upload is called and what the server answers.

Upload: ``POST /api/runs/{id}/artifacts?name=NAME&kind=KIND[&step=N]`` with the run token, the
file's bytes as the raw body (a directory travels as one uncompressed tar whose single top-level
entry is the directory). List: ``GET /api/runs/{id}/artifacts`` -> ``[ArtifactOut]``; download:
``GET /api/runs/{id}/artifacts/{artifact_id}/file``. Both sides validate names with ``name_problem``
so a client learns about a bad name before it sends gigabytes.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from grpodeck.contract.limits import MAX_STEP

ArtifactKind = Literal["checkpoint", "model", "trainer_state", "file"]
KINDS: tuple[str, ...] = ("checkpoint", "model", "trainer_state", "file")
TAR_SUFFIX = ".tar"  # a directory artifact: a tar stream of the directory
NAME_MAX = 128
# One path component of plain characters: the name becomes a download's file name, so no
# separators, no leading dot (hidden files, "." and ".."), nothing a shell or a header mangles.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)")  # TRL's (transformers') checkpoint folders


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an artifact, or None when it can."""
    if not name:
        return "an artifact needs a name"
    if len(name) > NAME_MAX:
        return f"an artifact name is at most {NAME_MAX} characters"
    if not NAME_RE.fullmatch(name) or ".." in name:
        return ("an artifact name is one file name: letters, digits, '.', '_', '+' and '-', "
                "starting with a letter or digit, without '..'")
    return None


def checkpoint_step(folder_name: str) -> int | None:
    """The global step a ``checkpoint-N`` folder was saved at."""
    match = CHECKPOINT_RE.fullmatch(folder_name)
    return int(match.group(1)) if match and int(match.group(1)) < MAX_STEP else None


class ArtifactOut(BaseModel):
    id: int
    run_id: int
    kind: ArtifactKind
    name: str
    step: int | None = Field(None, ge=0, lt=MAX_STEP)
    size: int = Field(ge=0, description="bytes stored")
    sha256: str
    created_at: datetime | None = None
    url: str = Field(description="where to download it (same access as the run)")
