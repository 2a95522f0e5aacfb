"""Pick the format by content (never by file name) and dispatch to its parser."""

from __future__ import annotations

import json
from pathlib import Path

from app.importers import console, json_rows, jsonl, keyvalue, trainer_state
from app.importers.base import ImportedLog, LogFormatError, check_steps
from app.metrics.names import rename_rows, renames_for

MAX_BYTES = 512 * 1024 * 1024  # refuse absurd files rather than exhaust memory


def _read_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_BYTES:
            raise LogFormatError(str(path), f"file is larger than {MAX_BYTES} bytes")
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise LogFormatError(str(path), "file not found") from exc
    except IsADirectoryError as exc:
        raise LogFormatError(str(path), "is a directory, not a log file") from exc
    except OSError as exc:
        raise LogFormatError(str(path), f"cannot read file: {exc.strerror or exc}") from exc
    if b"\x00" in raw[:4096]:
        raise LogFormatError(str(path), "binary file, not a text log")
    return raw.decode("utf-8", errors="replace")


def load_log(path: str | Path, logging_steps: int = 1,
             mapping: dict[str, str] | None = None) -> ImportedLog:
    """Read a training log of any supported format, in canonical metric names.

    Tries, in order: a whole-file JSON document (trainer_state or a list of step dicts),
    JSON Lines, a console log with printed dicts, verl's ``step:N - key:value`` lines, then
    any ``key: value`` / ``key=value`` lines. ``logging_steps`` is only used when a console
    log gives no other way to place its rows on the step axis. Another trainer's keys (verl,
    OpenRLHF) are renamed by its table in ``app.metrics.names``; ``mapping`` (log key ->
    canonical name, the user's ``--map``) applies on top.
    """
    return translate(_load(Path(path), logging_steps), mapping)


def translate(log: ImportedLog, mapping: dict[str, str] | None = None) -> ImportedLog:
    """Rename the log's keys into canonical names (detected vocabulary, then ``mapping``);
    what was renamed is kept in ``meta`` so an imported run shows it."""
    keys = {k for _, m in log.rows for k in m}
    renames, vocabulary = renames_for(keys, mapping)
    if vocabulary:
        log.meta["vocabulary"] = vocabulary
    if mapping:
        log.meta["mapping"] = ", ".join(f"{k}={v}" for k, v in sorted(mapping.items()))
    log.rows = rename_rows(log.rows, renames)
    return log


def _load(p: Path, logging_steps: int) -> ImportedLog:
    text = _read_text(p)
    if not text.strip():
        raise LogFormatError(str(p), "file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    else:
        if trainer_state.looks_like(data):
            return _non_empty(trainer_state.parse(data, str(p)), p)
        if json_rows.looks_like(data):
            return _non_empty(json_rows.parse(data, str(p)), p)
        if not isinstance(data, dict):
            raise LogFormatError(str(p), "JSON document is neither a trainer_state nor a list "
                                         "of step dicts")
    if jsonl.looks_like(text):
        return _non_empty(jsonl.parse(text, str(p)), p)
    if console.looks_like(text):
        return _non_empty(console.parse(text, str(p), logging_steps), p)
    if keyvalue.looks_like_verl(text):
        return _non_empty(keyvalue.parse(text, str(p), verl=True), p)
    if keyvalue.looks_like(text):
        return _non_empty(keyvalue.parse(text, str(p)), p)
    raise LogFormatError(str(p), "unrecognised format: expected trainer_state.json, a JSON list "
                                 "of step dicts, JSONL, a console log with printed dicts, or "
                                 "lines of key: value / key=value pairs")


def _non_empty(log: ImportedLog, p: Path) -> ImportedLog:
    if not log.rows:
        raise LogFormatError(str(p), f"{log.source_format} file holds no metric rows")
    return check_steps(log, str(p))
