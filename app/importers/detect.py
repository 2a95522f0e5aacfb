"""Pick the format by content (never by file name) and dispatch to its parser.

The one detection step: every reader sits behind :func:`load_log`, and every log, whatever
its reader, leaves through :func:`translate` (the vocabulary table and the user's mapping).
A reader refuses what it cannot read with ``LogFormatError``; nothing else may escape for
any bytes (``tests/importers/test_fuzz_readers.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from app.importers import (
    console,
    json_rows,
    jsonl,
    keyvalue,
    mlflow_db,
    mlruns,
    notebook,
    tensorboard,
    trainer_state,
    wandb,
)
from app.importers.base import ImportedLog, LogFormatError, check_steps, load_json
from app.metrics.reading import Reading, read_rows

MAX_BYTES = 512 * 1024 * 1024  # refuse absurd files rather than exhaust memory
ACCEPTED = ("trainer_state.json, a JSON list of step dicts, JSONL, a Jupyter notebook, a W&B "
            "history CSV, a console log with printed dicts, lines of key: value / key=value "
            "pairs, or a TensorBoard event file")
FOLDERS = "trainer_state.json, TensorBoard events, MLflow mlruns/ store or W&B run"


def _read_bytes(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_BYTES:
            raise LogFormatError(str(path), f"file is larger than {MAX_BYTES} bytes")
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise LogFormatError(str(path), "file not found") from exc
    except IsADirectoryError as exc:
        raise LogFormatError(str(path), "is a directory, not a log file") from exc
    except OSError as exc:
        raise LogFormatError(str(path), f"cannot read file: {exc.strerror or exc}") from exc


def load_log(path: str | Path, logging_steps: int = 1,
             mapping: dict[str, str] | None = None) -> ImportedLog:
    """Read a training log of any supported format, in canonical metric names.

    A folder: TensorBoard events, an MLflow ``mlruns/`` store, a W&B offline run. A file, by
    its bytes: a TensorBoard event file, an MLflow ``mlflow.db`` of one run, or a W&B
    ``.wandb`` file (refused with what to do instead); then a whole-file JSON document
    (trainer_state, a list of step dicts, a notebook), JSON Lines, a CSV with a step column (W&B's history export), a console log with
    printed dicts, verl's ``step:N - key:value`` lines, then any ``key: value`` / ``key=value``
    lines. ``logging_steps`` is only used when a console log gives no other way to place its
    rows on the step axis. Another trainer's keys (verl, OpenRLHF, a hand-written loop's) are
    renamed by its table in ``app.metrics.names``; ``mapping`` (log key -> canonical name, the
    user's ``--map``) applies on top.
    """
    p = Path(path)
    step_key, _ = split_step_key(mapping)
    log = _load_folder(p) if p.is_dir() else _load(p, logging_steps, step_key)
    return translate(_non_empty(log, p), mapping)


def split_step_key(mapping: dict[str, str] | None) -> tuple[str | None, dict[str, str] | None]:
    """(the key the user named as the step, the rest of the mapping): ``--map grpo_step=step``
    places the rows, it renames no metric."""
    step_keys = [k for k, v in (mapping or {}).items() if v == "step"]
    if not step_keys or mapping is None:
        return None, mapping
    return step_keys[0], {k: v for k, v in mapping.items() if v != "step"}


def translate(log: ImportedLog, mapping: dict[str, str] | None = None) -> ImportedLog:
    """Rename the log's keys into canonical names (detected vocabulary, then ``mapping``) by
    the reader every path uses (``app.metrics.reading``); a reading that did anything, renames
    included, is kept in ``meta["reading"]``, and ``renames`` holds each original key's final
    name (a reader's clean-up, then the reading) so a report can say what was read as what."""
    _, renaming = split_step_key(mapping)  # a step key placed the rows: no metric to rename
    log.rows, reading = read_rows(log.rows, Reading.start(mapping=renaming))
    if reading.vocabulary:
        log.meta["vocabulary"] = reading.vocabulary
    if mapping:
        log.meta["mapping"] = ", ".join(f"{k}={v}" for k, v in sorted(mapping.items()))
    if reading != Reading():
        log.meta["reading"] = reading
    log.renames = _compose(log.renames, dict(reading.renames))
    return log


def _compose(first: dict[str, str], then: dict[str, str]) -> dict[str, str]:
    """original -> final name through a reader's clean-up and then the vocabulary rename."""
    out = {orig: then.get(mid, mid) for orig, mid in first.items()}
    produced = set(first.values())
    out.update({k: v for k, v in then.items() if k not in produced})
    return out


def _load_folder(p: Path) -> ImportedLog:
    for reader in (tensorboard, mlruns, wandb):
        if reader.looks_like_folder(p):
            return reader.parse_folder(p)
    raise LogFormatError(str(p), f"folder holds no {FOLDERS}")


def _load(p: Path, logging_steps: int, step_key: str | None = None) -> ImportedLog:
    raw = _read_bytes(p)
    if tensorboard.looks_like_bytes(raw):
        return tensorboard.parse_file(p)
    if wandb.looks_like_transaction_log(raw):
        raise LogFormatError(str(p), wandb.OFFLINE_REFUSAL)
    if raw.startswith(mlflow_db.MAGIC) and mlflow_db.looks_like(p):
        return mlflow_db.parse_only_run(p)
    if b"\x00" in raw[:4096]:
        raise LogFormatError(str(p), "binary file, not a text log")
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise LogFormatError(str(p), "file is empty")
    return _load_text(text, str(p), logging_steps, step_key)


def _load_text(text: str, where: str, logging_steps: int,
               step_key: str | None = None) -> ImportedLog:
    """``step_key`` (the user's ``--map KEY=step``) is for the readers of rows of keys: JSON
    lists, JSON Lines, CSV; the others place their rows their own way."""
    data = _whole_json(text, where)
    if data is not None:
        if trainer_state.looks_like(data):
            return trainer_state.parse(data, where)
        if json_rows.looks_like(data):
            return json_rows.parse(data, where, step_key)
        if notebook.looks_like(data):
            return notebook.parse(data, where, logging_steps, text_log)
        if not isinstance(data, dict):
            raise LogFormatError(where, "JSON document is neither a trainer_state nor a list "
                                        "of step dicts")
    if jsonl.looks_like(text):
        return jsonl.parse(text, where, step_key)
    if wandb.looks_like_csv(text):
        return wandb.parse_csv(text, where, step_key)
    return text_log(text, where, logging_steps)


def text_log(text: str, where: str, logging_steps: int = 1) -> ImportedLog:
    """A console log's metrics: printed dicts, verl's lines, or ``key: value`` lines (also
    what a notebook's printed output is read as)."""
    if console.looks_like(text):
        return console.parse(text, where, logging_steps)
    if keyvalue.looks_like_verl(text):
        return keyvalue.parse(text, where, verl=True)
    if keyvalue.looks_like(text):
        return keyvalue.parse(text, where)
    raise LogFormatError(where, f"unrecognised format: expected {ACCEPTED}")


def _whole_json(text: str, where: str) -> object | None:
    """The file as one JSON document, or None when it is not one (JSONL, a console log)."""
    try:
        return load_json(text, where)
    except json.JSONDecodeError:
        return None


def _non_empty(log: ImportedLog, p: Path) -> ImportedLog:
    if not log.rows:
        raise LogFormatError(str(p), f"{log.source_format} file holds no metric rows")
    return check_steps(log, str(p))
