"""Weights & Biases: the history CSV exported from the W&B UI, and offline run folders.

CSV: a panel's "Export as CSV" writes ``Step, <run> - train/reward, <run> -
train/reward__MIN, <run> - train/reward__MAX, ...``; a run's history (``run.history()``
saved as CSV, or the UI's table export) writes ``_step, train/reward, ...``. Band columns
(``__MIN``/``__MAX``) and W&B's ``_runtime``/``_timestamp`` are left out; the Trainer's
``train/``/``eval/`` prefixes are removed (``app.importers.columns``). A panel export of
several runs is refused: one run per import.

Offline run folders (``wandb/offline-run-*/``): wandb 0.31 keeps the run in one binary file,
``run-<id>.wandb``, a LevelDB-style log of protobuf records that only wandb's Go core reads
(``wandb sync`` uploads it); the Python package has no reader for it any more (checked on
wandb 0.31.0: ``wandb.sdk.internal.datastore`` is gone). So a ``.wandb`` file is refused with
what to do instead. Older wandb versions also wrote ``files/wandb-history.jsonl`` (one JSON
object per step, ``_step``): when a folder has it, that is read.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from app.importers.base import ImportedLog, LogFormatError, load_json, merge_rows
from app.importers.columns import is_step, rename_keys, wandb_column
from app.importers.entries import EVAL_FLAGS, MARKER_KEYS, rows_of, split_eval_rows

MAGIC = b":W&B"
OFFLINE_REFUSAL = ("a W&B offline run file (.wandb) is a binary record log that only wandb's "
                   "own service reads (the wandb Python package has no reader for it): run "
                   "`wandb sync <run folder>`, then download the run's history as CSV from "
                   "the W&B UI (or `wandb.Api().run(...).history().to_csv(...)`) and import "
                   "that CSV")
HISTORY = "wandb-history.jsonl"
MAX_FOLDER_FILES = 10_000  # look no further into a folder than this many entries


def looks_like_transaction_log(raw: bytes) -> bool:
    """A ``.wandb`` file starts with ``:W&B`` (its LevelDB-log header)."""
    return raw.startswith(MAGIC)


def _csv_rows(text: str) -> list[list[str]]:
    try:
        return list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise LogFormatError("csv", f"not a readable CSV ({exc})") from None


def looks_like_csv(text: str) -> bool:
    """A comma-separated header and a second line of as many fields: with a step column (W&B's
    history), or a header of names over a row that is mostly numbers (any per-step CSV)."""
    head = text.lstrip("\ufeff").splitlines()[:2]
    if len(head) < 2 or "," not in head[0]:
        return False
    try:
        header, first = list(csv.reader(head))
    except (csv.Error, ValueError):
        return False
    if len(header) != len(first):
        return False
    names = [wandb_column(h) for h in header]
    return any(n == "step" for n in names) or _names_over_numbers(header, first)


def _names_over_numbers(header: list[str], first: list[str]) -> bool:
    """Every header cell a name (not a number), and most of the first row's cells numbers."""
    if any(not h.strip() or _number(h) is not None for h in header):
        return False
    return sum(_number(c) is not None for c in first) * 2 > len(first)


def _run_prefixes(header: list[str]) -> set[str]:
    return {h.split(" - ", 1)[0] for h in header if " - " in h and not is_step(h)}


def parse_csv(text: str, where: str, step_key: str | None = None) -> ImportedLog:
    """Rows by step from a W&B history CSV (see the module docstring), or from any per-step
    CSV: without a step column (or with ``step_key``, the user's ``--map KEY=step``) the step
    and the eval rows are found as for JSON rows (``app.importers.entries``). An empty cell is
    no value (never 0.0)."""
    try:
        header, *lines = _csv_rows(text.lstrip("\ufeff"))
    except (LogFormatError, ValueError):
        raise LogFormatError(where, "not a readable CSV") from None
    runs = _run_prefixes(header)
    if len(runs) > 1:
        raise LogFormatError(where, f"the CSV holds {len(runs)} runs ({', '.join(sorted(runs))})"
                                    ": export one run's panel, or its history")
    names = [wandb_column(h) for h in header]
    rename = {h: n for h, n in zip(header, names) if n is not None and n != h and n != "step"}
    entries = [_entry(names, cells) for cells in lines]
    if "step" in names and step_key is None:
        pairs, meta = _stepped(entries), {}
    else:
        pairs, meta = rows_of(((f"row {i}", e) for i, e in enumerate(entries, 2)), where,
                              step_key)
    return ImportedLog(rows=merge_rows(pairs), source_format="wandb_csv", renames=rename,
                       meta=meta)


def _entry(names: list[str | None], cells: list[str]) -> dict[str, object]:
    """One CSV row as a dict: numbers, and the text of a row marker (``split``: ``eval``);
    empty cells and band columns are left out."""
    out: dict[str, object] = {}
    for name, cell in zip(names, cells):
        if name is None:
            continue
        value = _number(cell)
        if value is not None:
            out[name] = value
        elif name in MARKER_KEYS + EVAL_FLAGS and cell.strip():
            out[name] = cell.strip()
    return out


def _stepped(entries: list[dict[str, object]]) -> list[tuple[int, dict]]:
    """W&B's own history: each row at its ``step`` cell; a row without a whole-number step is
    skipped (W&B writes none), eval rows marked as eval (``app.importers.entries``)."""
    pairs = []
    for entry in entries:
        step = entry.get("step")
        if not isinstance(step, float) or not math.isfinite(step) or step != int(step):
            continue
        metrics = {k: v for k, v in entry.items() if k != "step"}
        pairs.append((int(step), metrics))
    return split_eval_rows(pairs)


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except (ValueError, OverflowError):
        return None


def _find(folder: Path, pattern: str) -> list[Path]:
    found = []
    for i, path in enumerate(folder.rglob(pattern)):
        if i >= MAX_FOLDER_FILES:
            break
        found.append(path)
    return sorted(found)


def looks_like_folder(folder: Path) -> bool:
    """A W&B run folder (or one above it): a ``.wandb`` file or a ``wandb-history.jsonl``."""
    return bool(_find(folder, "*.wandb") or _find(folder, HISTORY))


def parse_folder(folder: Path) -> ImportedLog:
    """The run's ``files/wandb-history.jsonl`` when there is one; else the refusal."""
    histories = _find(folder, HISTORY)
    if len(histories) > 1:
        raise LogFormatError(str(folder), f"holds {len(histories)} W&B runs: diagnose one run "
                                          "folder")
    if not histories:
        raise LogFormatError(str(folder), OFFLINE_REFUSAL)
    rename: dict[str, str] = {}
    pairs = []
    text = histories[0].read_text(encoding="utf-8", errors="replace")
    for line in text.splitlines():
        try:
            entry = load_json(line, str(histories[0])) if line.strip() else None
        except json.JSONDecodeError:
            continue  # a line torn by a crash
        step = entry.get("_step") if isinstance(entry, dict) else None
        if isinstance(step, int) and not isinstance(step, bool):
            metrics = {k: v for k, v in entry.items() if not k.startswith("_")}  # type: ignore[union-attr]
            pairs.append((step, rename_keys(metrics, rename)))
    return ImportedLog(rows=merge_rows(pairs), source_format="wandb_history", renames=rename)
