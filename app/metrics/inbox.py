"""Received steps, one row per step, before they are spread into the metric store.

Why: a TRL step logs ~25 metrics, and one B-tree row per value on the request path was ~60 % of
the report handler (bench/ingest.py, issue 25). trackio stores one JSON row per step; so does
the inbox. ``spread`` then moves a run's inbox into its per-metric chunks (``store.write``);
``rollups.settle`` calls it off the request path (the settler, the end report, or ingest once
the inbox grows past ``SETTLE_EVERY_STEPS``).

JSON has no NaN or infinity: such a value is stored as its text ("nan", "inf", "-inf"), which
``spread`` turns back into the float64 value the chunk keeps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import orjson
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.metrics import store
from app.metrics.chunks import Points
from app.metrics.names import Row
from app.metrics.series import all_finite

NAME_MAX = 200  # metric_keys.name's size

# The batch travels as one JSON object {step: metrics}, one parameter, and the database splits
# it into rows: no per-row parameter binding (psycopg's text[] dumper escaped every quote of
# every row's JSON with a regular expression: ~40 % of the PostgreSQL handler). A step already
# waiting gets the new values merged over its old ones.
_WRITE = {
    "sqlite": text(
        "INSERT INTO metric_inbox (run_id, step, metrics) "
        "SELECT :run, CAST(key AS INTEGER), value FROM json_each(:batch) WHERE true "
        "ON CONFLICT (run_id, step) DO UPDATE SET "
        "metrics = json_patch(metric_inbox.metrics, excluded.metrics)"),
    "postgresql": text(
        "INSERT INTO metric_inbox (run_id, step, metrics) "
        "SELECT :run, key::int, value::text FROM json_each(CAST(:batch AS json)) "
        "ON CONFLICT (run_id, step) DO UPDATE SET "
        "metrics = (metric_inbox.metrics::jsonb || excluded.metrics::jsonb)::text"),
}
# ``WHERE true`` keeps SQLite from reading ON CONFLICT as a join constraint of the SELECT.
_ALL = text("SELECT step, metrics FROM metric_inbox WHERE run_id = :run ORDER BY step")
_EMPTY = text("DELETE FROM metric_inbox WHERE run_id = :run")
_PENDING = text("SELECT step, metrics FROM metric_inbox WHERE run_id = :run AND step > :after "
                "ORDER BY step")


def storable(metrics: dict[str, float]) -> dict[str, float | str]:
    """One step's metrics as stored: names cut to the column, NaN/inf as their text."""
    if metrics and max(map(len, metrics)) > NAME_MAX:
        cut: dict[str, float] = {}
        for name, value in metrics.items():
            cut[name[:NAME_MAX]] = value  # a later name that cuts the same wins, as in a row
        metrics = cut
    if all_finite(metrics.values()):
        return metrics  # type: ignore[return-value]
    return {k: v if math.isfinite(v) else repr(v) for k, v in metrics.items()}


def write(db: Session, run_id: int, rows: Sequence[Row]) -> int:
    """Store rows, one per step; returns the values stored. The caller holds the run's write
    lock."""
    merged: dict[int, dict[str, float]] = {}
    for step, metrics in rows:
        if metrics:
            merged[step] = {**merged[step], **metrics} if step in merged else metrics
    if not merged:
        return 0
    batch = orjson.dumps({step: storable(m) for step, m in merged.items()},
                         option=orjson.OPT_NON_STR_KEYS).decode()
    connection = db.connection()
    dialect = "postgresql" if connection.dialect.name == "postgresql" else "sqlite"
    connection.execute(_WRITE[dialect], {"run": run_id, "batch": batch})
    return sum(len(m) for m in merged.values())


def spread(db: Session, run_id: int) -> dict[str, Points]:
    """Move the run's waiting steps into its chunks (``store.write``: a value already there is
    overwritten, a re-sent step) and return every point of the chunks written. The caller
    holds the run's write lock, so no batch lands between the copy and the delete."""
    connection = db.connection()
    written = store.write(db, run_id, columns(connection.execute(_ALL, {"run": run_id}).all()))
    connection.execute(_EMPTY, {"run": run_id})
    return written


def columns(rows: Sequence[tuple[int, str]]) -> dict[str, Points]:
    """Inbox rows (step ascending, metrics as JSON) as per-metric arrays. Steps that log the
    same names in the same order (almost all of a run's) become one 2-D array in one numpy
    call, not a Python step per value; numpy reads a non-finite value's text ("nan", "inf",
    "-inf") as the number."""
    shapes: dict[tuple[str, ...], tuple[list[int], list[list[float | str]]]] = {}
    for step, metrics in rows:
        values = orjson.loads(metrics)
        steps, table = shapes.setdefault(tuple(values), ([], []))
        steps.append(step)
        table.append(list(values.values()))
    parts: dict[str, list[Points]] = {}
    for names, (steps, table) in shapes.items():
        at = np.array(steps, np.int64)
        grid = np.array(table, np.float64).reshape(len(steps), len(names))
        for i, name in enumerate(names):
            parts.setdefault(name, []).append((at, grid[:, i]))
    out: dict[str, Points] = {}
    for name, pieces in parts.items():
        if len(pieces) == 1:
            out[name] = (pieces[0][0], np.ascontiguousarray(pieces[0][1]))
            continue
        steps_ = np.concatenate([p[0] for p in pieces])
        order = np.argsort(steps_, kind="stable")
        out[name] = (steps_[order], np.concatenate([p[1] for p in pieces])[order])
    return out


def pending(db: Session, run_id: int, after: int,
            names: Sequence[str] | None = None) -> list[Row]:
    """The run's waiting steps after ``after`` as rows (non-finite values restored); with
    ``names``, only those metrics (a step holding none of them is left out): the runs list
    wants 3 of a TRL step's ~25, and converting every value of up to 4,096 waiting steps per
    live run was most of its time."""
    out: list[Row] = []
    for step, metrics in db.connection().execute(  # all rows at once: no fetch per row
            _PENDING, {"run": run_id, "after": after}).all():
        values = orjson.loads(metrics)
        if names is not None:
            values = {n: values[n] for n in names if n in values}
            if not values:
                continue
        out.append((step, {k: v if type(v) is float else float(v) for k, v in values.items()}))
    return out
