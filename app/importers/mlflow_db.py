"""MLflow's SQL store in a SQLite file: ``mlflow.db``, what MLflow 3 writes by default (tracking
URI ``sqlite:///mlflow.db``). Read with the standard library's ``sqlite3``, read-only, by the
tables' documented layout: the web host needs no MLflow, and nothing here writes to the file.

Told apart from a trackio project (also SQLite, also a ``metrics`` table) by its tables:
``experiments``, ``runs``, ``metrics`` (``key, value, timestamp, run_uuid, step, is_nan``) and
``params``. Every active run of an active experiment that logged a metric is a run to import;
deleted ones (``lifecycle_stage = 'deleted'``) are left out, as MLflow's UI leaves them out.
MLflow stores NaN as 0 with ``is_nan`` set and clamps infinities to the largest float: both are
read back as what was logged.
"""

from __future__ import annotations

import math
import sqlite3
import sys
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from app.importers.base import ImportedLog, LogFormatError, check_steps, merge_rows
from app.importers.columns import logger_name

MAGIC = b"SQLite format 3\x00"
TABLES = frozenset({"experiments", "runs", "metrics", "params"})
MAX_RUNS = 1_000  # one Deck run each: a store of more is imported a part at a time
MAX_POINTS = 20_000_000  # per run: what a long run logs, far from what memory holds
RUNS_SQL = """
    SELECT r.run_uuid, COALESCE(NULLIF(r.name, ''), r.run_uuid), e.name FROM runs r
    JOIN experiments e ON e.experiment_id = r.experiment_id
    WHERE r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'
      AND EXISTS (SELECT 1 FROM metrics m WHERE m.run_uuid = r.run_uuid)
    ORDER BY r.start_time, r.run_uuid LIMIT ?"""
POINTS_SQL = """SELECT key, value, step, is_nan FROM metrics WHERE run_uuid = ?
    ORDER BY step, timestamp LIMIT ?"""


@dataclass(frozen=True)
class MlflowRun:
    """One run of the store: its id, its name (MLflow generates one when none was given) and
    its experiment's name."""

    run_id: str
    name: str
    experiment: str


def _connect(path: Path) -> sqlite3.Connection:
    """Read-only (``mode=ro``); the file's path as a URI, so ``?`` or ``#`` in it stay a name."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}


def looks_like(path: Path) -> bool:
    """A SQLite file holding MLflow's tables (real tables: a view of that name is not one)."""
    try:
        with path.open("rb") as fh:
            if fh.read(len(MAGIC)) != MAGIC:
                return False
        with closing(_connect(path)) as db:
            return TABLES <= _tables(db)
    except (OSError, sqlite3.Error):
        return False


def runs(path: Path) -> list[MlflowRun]:
    """The store's runs to import, oldest first; LogFormatError when there are more than
    ``MAX_RUNS`` or the file cannot be read."""
    try:
        with closing(_connect(path)) as db:
            found = [MlflowRun(str(r), str(n), str(e))
                     for r, n, e in db.execute(RUNS_SQL, (MAX_RUNS + 1,))]
    except sqlite3.Error as exc:
        raise LogFormatError(str(path), f"unreadable MLflow store: {exc}") from None
    if len(found) > MAX_RUNS:
        raise LogFormatError(str(path), f"holds more than {MAX_RUNS} MLflow runs")
    return found


def _value(value: object, is_nan: object) -> float | None:
    """What was logged: NaN where MLflow marked it, an infinity where it clamped one."""
    if is_nan:
        return math.nan
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    value = float(value)
    return math.copysign(math.inf, value) if abs(value) == sys.float_info.max else value


def typed(text: str) -> int | float | bool | str:
    """A param as what it was before MLflow made it text: the diagnostics read a run's
    settings (``num_generations``, ``beta``, ``max_completion_length``) as numbers."""
    if text in ("True", "true", "False", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            number = kind(text)
        except ValueError:
            continue
        return number if math.isfinite(number) else text
    return text


def _params(db: sqlite3.Connection, run_id: str) -> dict[str, int | float | bool | str]:
    return {str(k): typed(str(v)) for k, v in db.execute(
        "SELECT key, value FROM params WHERE run_uuid = ? ORDER BY key", (run_id,))}


def parse(path: Path, run: MlflowRun) -> ImportedLog:
    """One run of the store as a log; its params and names in ``meta`` (a run without a
    number is a LogFormatError)."""
    try:
        with closing(_connect(path)) as db:
            points = db.execute(POINTS_SQL, (run.run_id, MAX_POINTS + 1)).fetchall()
            params = _params(db, run.run_id)
    except sqlite3.Error as exc:
        raise LogFormatError(str(path), f"unreadable MLflow store: {exc}") from None
    if len(points) > MAX_POINTS:
        raise LogFormatError(str(path), f"MLflow run {run.name!r} holds more than "
                                        f"{MAX_POINTS} metric values")
    renames = {str(k): logger_name(str(k)) for k in {p[0] for p in points}
               if logger_name(str(k)) != k}
    pairs = [(int(step), {logger_name(str(key)): v}) for key, value, step, is_nan in points
             if (v := _value(value, is_nan)) is not None and isinstance(step, int)]
    rows = merge_rows(pairs)
    if not rows:
        raise LogFormatError(str(path), f"MLflow run {run.name!r} logged no numbers")
    meta = {**params, "mlflow_run": run.name, "mlflow_experiment": run.experiment,
            "mlflow_run_id": run.run_id}
    return check_steps(ImportedLog(rows, "mlflow_db", meta, renames), str(path))


def parse_only_run(path: Path) -> ImportedLog:
    """A store holding exactly one run, as one log (``grpodeck diagnose mlflow.db``); a store
    of several is refused naming them: ``grpodeck import`` reads each as a run of its own."""
    found = runs(path)
    if len(found) != 1:
        names = ", ".join(r.name for r in found[:10]) or "none that logged a metric"
        raise LogFormatError(str(path), f"holds {len(found)} MLflow runs ({names}): "
                                        "grpodeck import reads each as a run of its own")
    return parse(path, found[0])
