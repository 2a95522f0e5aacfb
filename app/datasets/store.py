"""Check an uploaded prompt dataset and keep it in the datasets directory.

Runs may read local datasets only from ``GRPODECK_DATASETS_DIR``; this is how files get there.
A file is accepted only if the worker will be able to train on it: JSON lines (or one JSON list)
of objects that all carry a ``prompt``, either text or chat messages, the same kind in every row.
Files are written next to their final name and linked into place, so a reader never sees half a
file and an existing dataset is never overwritten.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.(jsonl|json)$")


class DatasetError(ValueError):
    """Why an upload was refused, worded for the person who sent it (row numbers, never a quote
    of the file)."""


class DatasetExists(DatasetError):
    pass


@dataclass(frozen=True)
class StoredDataset:
    name: str
    rows: int
    columns: list[str]
    size_bytes: int


def check_name(filename: str) -> str:
    """The upload's own file name, without folders; letters, digits, ``._-``, ending .json(l)."""
    name = Path(filename.replace("\\", "/")).name.strip()
    if not NAME.match(name):
        raise DatasetError("the file name must end in .jsonl or .json and use only letters, "
                           "digits, '.', '_' and '-' (at most 100 characters)")
    return name


def _is_chat(value: Any) -> bool:
    return (isinstance(value, list) and len(value) > 0 and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in value))


def _rows(data: bytes, name: str) -> list[Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DatasetError("the file is not UTF-8 text") from None
    if name.endswith(".json") and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"not valid JSON (line {exc.lineno}, column {exc.colno})") from None
        return rows
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise DatasetError(f"line {number} is not valid JSON (one object per line)") from None
    return rows


def validate(data: bytes, name: str) -> tuple[int, list[str]]:
    """Return ``(rows, columns)`` of a dataset the trainer can use, or raise DatasetError."""
    rows = _rows(data, name)
    if not rows:
        raise DatasetError("the file holds no rows")
    columns: dict[str, None] = {}
    kinds = set()
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DatasetError(f"row {number} is not a JSON object")
        prompt = row.get("prompt")
        if isinstance(prompt, str) and prompt.strip():
            kinds.add("text")
        elif _is_chat(prompt):
            kinds.add("chat")
        else:
            raise DatasetError(f"row {number} needs a 'prompt': non-empty text or a list of "
                               "{role, content} messages")
        columns.update(dict.fromkeys(row))
    if len(kinds) > 1:
        raise DatasetError("mix of text and chat prompts: use one kind in every row")
    return len(rows), list(columns)


def save(directory: Path, filename: str, data: bytes) -> StoredDataset:
    """Validate and store; refuses to replace an existing dataset (runs may be reading it)."""
    name = check_name(filename)
    rows, columns = validate(data, name)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    fd, tmp = tempfile.mkstemp(prefix=".upload-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, target)  # atomic, and fails instead of overwriting
        except FileExistsError:
            raise DatasetExists(f"a dataset named {name!r} already exists; "
                                "choose another file name") from None
    finally:
        os.unlink(tmp)
    return StoredDataset(name, rows, columns, len(data))


def list_names(directory: Path) -> list[str]:
    """Dataset files in the directory (not in sub-folders), by name; hidden temp files skipped."""
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir()
                  if p.is_file() and NAME.match(p.name))
