"""A trackio project: the SQLite file trackio keeps per project (``$TRACKIO_DIR/<project>.db``),
read by its documented layout with the standard library (the web host needs no trackio).

Table ``metrics`` holds one row per ``trackio.log`` call: ``run_name``, ``step`` and ``metrics``,
a JSON document (text or bytes). The transformers integration prefixes names with ``train/`` and
``eval/``; they become the names a TRL log uses (``loss``, ``eval_loss``). Table ``configs`` holds
each run's config as JSON; its plain values become the imported run's settings.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from app.importers.base import ImportedLog, LogFormatError, check_steps, merge_rows

MAGIC = b"SQLite format 3\x00"


def looks_like(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "metrics" not in tables:
        db.close()
        raise LogFormatError(str(path), "SQLite file without a 'metrics' table: not a trackio "
                                        "project")
    return db


def _document(raw: Any) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _renamed(metrics: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in metrics.items():
        if key.startswith("train/"):
            key = key.removeprefix("train/")
        elif key.startswith("eval/"):
            key = "eval_" + key.removeprefix("eval/")
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value
    return out


def run_names(path: Path) -> list[str]:
    """The project's runs, in the order they first logged."""
    try:
        with closing(_connect(path)) as db:
            return [name for (name,) in db.execute(
                "SELECT run_name FROM metrics GROUP BY run_name ORDER BY MIN(id)")]
    except sqlite3.DatabaseError as exc:
        raise LogFormatError(str(path), f"unreadable SQLite file: {exc}") from None


def parse(path: Path, run_name: str) -> ImportedLog:
    """One run of the project as a log (a run that logged no number is a LogFormatError)."""
    try:
        with closing(_connect(path)) as db:
            pairs = [(int(step), _renamed(_document(doc))) for step, doc in db.execute(
                "SELECT step, metrics FROM metrics WHERE run_name = ? ORDER BY id", (run_name,))]
            config = db.execute("SELECT config FROM configs WHERE run_name = ? ORDER BY id DESC",
                                (run_name,)).fetchone() if _has_configs(db) else None
    except sqlite3.DatabaseError as exc:
        raise LogFormatError(str(path), f"unreadable SQLite file: {exc}") from None
    rows = merge_rows([(s, m) for s, m in pairs if m])
    if not rows:
        raise LogFormatError(str(path), f"trackio run {run_name!r} logged no numbers")
    meta = {k: v for k, v in _document(config[0] if config else None).items()
            if not k.startswith("_")}
    return check_steps(ImportedLog(rows, "trackio", meta), str(path))


def _has_configs(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='configs'"
                      ).fetchone() is not None
