"""A run's metrics as JSON: ``GET /api/runs/{id}/metrics`` (raw or downsampled series, what a
live chart appends) and ``GET /api/runs/{id}/chart`` (a zoomed chart's range at the finest
resolution that fits); and as a file, ``GET /api/runs/{id}/export`` (every row, streamed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi.responses import StreamingResponse

from app.core.db import SessionDep, get_sessionmaker
from app.metrics import export, waiting
from app.metrics.rollups import chart_data
from app.metrics.samples import load as load_samples
from app.metrics.series import downsample, load_series
from app.runs.lookup import run_or_404
from app.runs.service import get_run

router = APIRouter(prefix="/api/runs", tags=["runs"])
SeriesJSON = dict[str, dict[str, list[float | int | str | None]]]


def _answer(payload: dict[str, Any]) -> Response:
    """The answer encoded by orjson, as is: FastAPI's way (validate against the return type,
    then the standard library's encoder) was most of a 50k-point answer's time, and stdlib's
    alone ~6x orjson's. NaN/inf are strings already (``Series.to_json``); one that slipped
    through would be null here, never the invalid JSON ``NaN``."""
    return Response(orjson.dumps(payload), media_type="application/json")


@router.get("/{run_id}/metrics", response_model=SeriesJSON)
def metrics(run_id: int, db: SessionDep,
            names: Annotated[str | None, Query(description="comma-separated metric names")] = None,
            max_points: Annotated[int | None, Query(ge=3, le=1_000_000)] = None,
            after: Annotated[int | None, Query(ge=-1, lt=2**31,
                                               description="only steps after this one")] = None,
            ) -> Response:
    """Per metric name: steps and values (NaN/inf as strings). ``max_points`` downsamples;
    ``after`` returns only newer steps (what a live chart appends). Settled points plus the
    steps still waiting in the inbox: no write lock taken (``app/metrics/waiting.py``)."""
    run = run_or_404(db, run_id)
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    pending = waiting.by_name(waiting.rows(db, run, -1 if after is None else after, wanted),
                              wanted)
    series = waiting.merge(load_series(db, run_id, wanted, after), pending)  # inbox read first
    limit = max_points or 0
    return _answer({name: (downsample(s, limit) if limit else s).to_json()
                    for name, s in series.items()})


@router.get("/{run_id}/chart")
def chart(run_id: int, db: SessionDep,
          names: Annotated[str | None, Query(description="comma-separated metric names")] = None,
          x0: Annotated[int | None, Query(ge=0, lt=2**31, description="first step")] = None,
          x1: Annotated[int | None, Query(ge=0, lt=2**31, description="last step")] = None,
          max_points: Annotated[int, Query(ge=8, le=20_000)] = 2_000,
          ) -> Response:
    """Chart data for steps ``x0..x1`` (a zoomed chart's visible range; default the whole run)
    at the finest resolution that fits ``max_points`` per metric: raw points (level 0) or, per
    bucket of ``width`` steps, its min and max (NaN/inf as strings, one per bucket that had
    any). ``last_step`` is where a live poll (``metrics?after=``) resumes."""
    run = run_or_404(db, run_id)
    if x0 is not None and x1 is not None and x1 < x0:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            f"x1 ({x1}) is before x0 ({x0})")
    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else None
    data = chart_data(db, run, max_points, wanted, x0, x1)
    return _answer({"level": data.level, "width": data.width, "last_step": data.last_step,
                    "series": {name: s.to_json() for name, s in data.series.items()}})


@router.get("/{run_id}/export", response_class=StreamingResponse,
            responses={200: {"content": {t: {} for t in export.FORMATS.values()},
                             "description": "one row per step, as a file download"}})
def export_rows(run_id: int, db: SessionDep,
                format: Annotated[Literal["jsonl", "csv"], Query(
                    description="jsonl: a JSON object per step; csv: a column per metric")
                ] = "jsonl") -> StreamingResponse:
    """Every stored row of the run (settled and still waiting), one per step, streamed: what
    ``grpodeck diagnose`` and ``grpodeck import`` read back. NaN/inf as their text ("nan",
    "inf", "-inf"); an empty CSV cell: no value on that step. Whoever may view the run may
    export it."""
    run = run_or_404(db, run_id)
    name = export.filename(run, format)
    return StreamingResponse(
        _streamed(run_id, format), media_type=export.FORMATS[format],
        headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _streamed(run_id: int, fmt: str) -> Iterator[str]:
    """The export from a session of its own: the request's is closed once the answer starts."""
    with get_sessionmaker()() as db:
        run = get_run(db, run_id)
        if run is not None:  # deleted since the request found it: an empty file
            yield from export.lines(db, run, fmt)


@router.get("/{run_id}/system-samples")
def system_samples(run_id: int, db: SessionDep,
                   after_ms: Annotated[int | None, Query(
                       ge=0, lt=2**62, description="only samples after this time (ms)")] = None,
                   ) -> Response:
    """The run's system samples, each at its own time (``app/metrics/samples.py``): per metric
    name its points' times (``x``, ms since the epoch), values, and the step each sample was
    taken at (``steps``; ``text``: "step N", as the chart's tooltip says). ``last_ms`` is where
    a live chart's next poll (``after_ms=``) resumes; 0 before any sample."""
    run_or_404(db, run_id)
    kept = load_samples(db, run_id, after_ms)
    step_at = kept.step_at()
    series = {}
    for name, (xs, ys) in kept.points.items():
        steps = [step_at[t] for t in xs]
        series[name] = {"x": xs, "values": ys, "steps": steps,
                        "text": [f"step {s}" for s in steps]}
    return _answer({"last_ms": kept.times[-1] if kept.times else (after_ms or 0),
                    "series": series})
