"""The settled points of every run: written and read as per-metric chunks (``chunks.py``).

Every reader of settled points comes through here (charts, the metric API, compare, export,
the diagnosis replay, the runs list); the settler is the one writer (``inbox.spread``). A
series is read as numpy arrays, one decode per chunk instead of one Python tuple per point.

Metric names are stored once, in ``metric_keys``; a chunk row carries the name's id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from sqlalchemy import bindparam, delete, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.metrics import chunks
from app.metrics.chunks import Points
from app.metrics.models import MetricChunk, MetricKey

EMPTY: Points = (np.empty(0, np.int64), np.empty(0, np.float64))


def metric_ids(db: Session, names: Iterable[str], create: bool = False) -> dict[str, int]:
    """Name -> id of the names that have one; with ``create``, every name gets one. Not cached
    across transactions: an id handed out by a transaction that then rolls back would mean
    nothing (or, on SQLite, another name) to the next one."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    connection = db.connection()
    if create:
        insert = (postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert)
        connection.execute(insert(MetricKey).on_conflict_do_nothing(index_elements=["name"]),
                           [{"name": name} for name in wanted])
    return dict(connection.execute(select(MetricKey.name, MetricKey.id)
                                   .where(MetricKey.name.in_(wanted))).tuples().all())


def write(db: Session, run_id: int, points: dict[str, Points]) -> dict[str, Points]:
    """Write each metric's points (ascending, unique steps) over what its chunks hold: a step
    already stored takes its new value. The caller holds the run's write lock. Returns, per
    metric, every point of the chunks written (what their summaries are computed from)."""
    points = {name: p for name, p in points.items() if p[0].size}
    if not points:
        return {}
    ids = metric_ids(db, points, create=True)
    names = {metric_id: name for name, metric_id in ids.items()}
    pieces = {(ids[name], chunk): piece for name, p in points.items()
              for chunk, piece in chunks.split(p)}
    stored = _stored_chunks(db, run_id, set(pieces))
    rows = []
    written: dict[str, list[Points]] = {}
    for (metric_id, chunk), piece in sorted(pieces.items()):
        steps, values = chunks.merge(stored.get((metric_id, chunk), EMPTY), piece)
        written.setdefault(names[metric_id], []).append((steps, values))
        rows.append({"run_id": run_id, "metric_id": metric_id, "chunk": chunk,
                     **chunks.columns(steps, values)})
    connection = db.connection()
    insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    statement = insert(MetricChunk)
    connection.execute(statement.on_conflict_do_update(
        index_elements=["run_id", "metric_id", "chunk"],
        set_={c: statement.excluded[c] for c in
              ("first_step", "last_step", "n", "last_finite", "data")}), rows)
    return {name: (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
            for name, parts in written.items()}


# Both key columns named: with the chunk alone, every chunk row of the run was read (30k for a
# 1M-step run of 30 metrics, at every settle).
_STORED = text("SELECT metric_id, chunk, n, data FROM metric_chunks "
               "WHERE run_id = :run AND metric_id IN :metrics AND chunk IN :chunks").bindparams(
    bindparam("metrics", expanding=True), bindparam("chunks", expanding=True))


def _stored_chunks(db: Session, run_id: int, wanted: set[tuple[int, int]]
                   ) -> dict[tuple[int, int], Points]:
    """The run's chunks with these (metric id, chunk) keys, decoded, by that key."""
    rows = db.connection().execute(_STORED, {
        "run": run_id, "metrics": sorted({m for m, _ in wanted}),
        "chunks": sorted({c for _, c in wanted})})
    return {(metric_id, chunk): chunks.decode(data, n) for metric_id, chunk, n, data in rows
            if (metric_id, chunk) in wanted}


def read(db: Session, run_id: int, names: Sequence[str] | None = None,
         after: int | None = None, through: int | None = None) -> dict[str, Points]:
    """Per metric name (all, or ``names``), its settled points with ``after < step <=
    through``, in step order; names in order."""
    if not names and (after is not None or through is not None):
        # the key is (run, metric, chunk): a step range is an index range metric by metric
        names = run_names(db, run_id)
    stmt = (select(MetricKey.name, MetricChunk.n, MetricChunk.data)
            .join(MetricKey, MetricKey.id == MetricChunk.metric_id)
            .where(MetricChunk.run_id == run_id))
    if names:
        stmt = stmt.where(MetricKey.name.in_(list(names)))
    if after is not None:
        stmt = stmt.where(MetricChunk.chunk >= chunks.chunk_of(max(after + 1, 0)),
                          MetricChunk.last_step > after)
    if through is not None:
        stmt = stmt.where(MetricChunk.chunk <= chunks.chunk_of(max(through, 0)),
                          MetricChunk.first_step <= through)
    parts: dict[str, list[Points]] = {}
    for name, n, data in db.connection().execute(
            stmt.order_by(MetricKey.name, MetricChunk.chunk)):
        parts.setdefault(name, []).append(chunks.decode(data, n))
    out: dict[str, Points] = {}
    for name, pieces in parts.items():
        steps = np.concatenate([p[0] for p in pieces])
        values = np.concatenate([p[1] for p in pieces])
        if after is not None or through is not None:
            keep = (steps > (-2**63 if after is None else after)) & (
                steps <= (2**63 - 1 if through is None else through))
            steps, values = steps[keep], values[keep]
        if steps.size:
            out[name] = (steps, values)
    return out


def chunk_indexes(db: Session, run_id: int, after: int = -1) -> list[int]:
    """The run's chunk indexes holding steps after ``after``, ascending: a key range per metric
    (the chunk alone would read every chunk row of the run)."""
    ids = list(metric_ids(db, run_names(db, run_id)).values())
    if not ids:
        return []
    return list(db.connection().execute(
        select(MetricChunk.chunk).distinct()
        .where(MetricChunk.run_id == run_id, MetricChunk.metric_id.in_(ids),
               MetricChunk.chunk >= chunks.chunk_of(max(after + 1, 0)),
               MetricChunk.last_step > after)
        .order_by(MetricChunk.chunk)).scalars())


_LAST_CHUNK = text("SELECT n, data FROM metric_chunks WHERE run_id = :run AND metric_id = :metric "
                   "ORDER BY chunk DESC LIMIT 1")


def last_points(db: Session, run_id: int) -> dict[str, tuple[int, float]]:
    """Per metric name, its last settled (step, value), NaN/inf as stored: one keyed seek to
    each metric's last chunk (a GROUP BY over the run's chunks, or a correlated max, read every
    chunk row: 6-17 ms at 100k steps on SQLite, against ~1 ms for 25 seeks)."""
    connection = db.connection()
    out = {}
    for name, metric_id in metric_ids(db, run_names(db, run_id)).items():
        row = connection.execute(_LAST_CHUNK, {"run": run_id, "metric": metric_id}).first()
        if row is not None:
            steps, values = chunks.decode(row[1], row[0])
            out[name] = (int(steps[-1]), float(values[-1]))
    return out


def run_names(db: Session, run_id: int) -> list[str]:
    """The run's metric names as ingest keeps them on its row (``pipeline._note_names``): one
    row, where the chunks would need a scan of every chunk of the run. Read through the
    session, so a name noted earlier in the same transaction counts."""
    from app.runs.models import Run  # the run imports nothing from here; keep it that way

    run = db.get(Run, run_id)
    return list(run.metric_names or []) if run is not None else []


def last_finite_sql(metric: str) -> str:
    """SQL for a run's (``runs.id``) last finite value of ``metric``, one keyed seek back from
    its last chunk. ``metric`` is one of the app's own names, never user text."""
    if not metric.replace("_", "").replace("/", "").isalnum():
        raise ValueError(f"not a metric name for SQL: {metric!r}")
    return ("(SELECT c.last_finite FROM metric_chunks c WHERE c.run_id = runs.id "
            f"AND c.metric_id = (SELECT id FROM metric_keys WHERE name = '{metric}') "
            "AND c.last_finite IS NOT NULL ORDER BY c.chunk DESC LIMIT 1)")


def delete_run(db: Session, run_id: int) -> None:
    """Every chunk of the run (the foreign key would cascade; done here so a run's deletion
    does not depend on it)."""
    db.execute(delete(MetricChunk).where(MetricChunk.run_id == run_id))
