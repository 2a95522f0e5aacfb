"""Store a training run made elsewhere as an imported run, with the same charts, findings and
rollouts as a launched one: its log (trainer_state.json, JSON/JSONL rows, console log) and, when
TRL wrote them (``log_completions=True``), its ``completions/completions_<step>.parquet`` files."""

from __future__ import annotations

import math
from pathlib import Path

from sqlalchemy.orm import Session

from app.diagnostics import Diagnosis, RunContext, diagnose
from app.importers import LogFormatError, load_log, trackio
from app.importers.completions import load_completions
from app.metrics import pipeline
from app.rollouts.signals import step_signals
from app.runs import service
from app.runs.models import Run
from grpodeck.contract.fields import cleaned
from grpodeck.contract.wire import RolloutStep


def locate(path: Path) -> tuple[Path, Path | None]:
    """The log file and the completions folder of a run directory, a checkpoint or a file.

    TRL keeps completions in ``<output_dir>/completions`` and the trainer state in
    ``<output_dir>/checkpoint-N/``, so both the folder and its parent are looked at.
    """
    log = path
    if path.is_dir():
        candidates = [path / "trainer_state.json"] + sorted(
            path.glob("checkpoint-*/trainer_state.json"),
            key=lambda p: int(p.parent.name.split("-")[-1]) if p.parent.name.split("-")[-1].isdigit() else -1)
        existing = [p for p in candidates if p.is_file()]
        if not existing:
            raise LogFormatError(str(path), "folder holds no trainer_state.json")
        log = existing[0] if existing[0].parent == path else existing[-1]
    for folder in (log.parent, log.parent.parent):
        if (folder / "completions").is_dir():
            return log, folder / "completions"
    return log, None


def _storable_meta(meta: dict) -> dict[str, int | float | str]:
    """The log's own settings worth keeping (max_steps, logging_steps...): plain values only,
    finite (a JSON column has no NaN), bounded, and without text a database cannot store."""
    out: dict[str, int | float | str] = {}
    for key, value in meta.items():
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        if isinstance(value, int) and not -(2**53) < value < 2**53:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            continue
        out[cleaned(str(key))[:100]] = cleaned(value)[:200] if isinstance(value, str) else value
    return out


def import_log(db: Session, path: Path, name: str | None = None,
               source_name: str | None = None, completions: Path | None = None) -> Run:
    """Raises app.importers.LogFormatError (nothing stored) when a file can't be read.

    ``source_name`` is the file's original name when ``path`` is an upload's temporary copy.
    """
    log_path, found = locate(path)
    completions = completions or found
    log = load_log(log_path)
    rollout_steps = ([RolloutStep.model_validate(s) for s in load_completions(completions)]
                     if completions else [])
    last_step = log.rows[-1][0]
    spec = {"source_file": source_name or log_path.name, "source_format": log.source_format,
            "rollout_steps": len(rollout_steps), **_storable_meta(log.meta)}
    run = service.create_imported_run(db, name=name or source_name or log_path.name, spec=spec,
                                      max_step=last_step)
    pipeline.receive(db, run, log.rows, rollout_steps, track_progress=False)
    return run


def import_path(db: Session, path: Path, name: str | None = None,
                source_name: str | None = None, completions: Path | None = None) -> list[Run]:
    """A log as one run, or a trackio project (its SQLite file) as one run per trackio run,
    each named ``<name or file>/<trackio run>``. Raises LogFormatError; nothing is stored then."""
    if not trackio.looks_like(path):
        return [import_log(db, path, name, source_name, completions)]
    source = source_name or path.name
    runs = []
    for run_name in trackio.run_names(path):
        log = trackio.parse(path, run_name)
        spec = {"source_file": source, "source_format": log.source_format,
                "trackio_run": cleaned(run_name)[:200], **_storable_meta(log.meta)}
        label = cleaned(f"{name or Path(source).stem}/{run_name}")[:120]
        run = service.create_imported_run(db, name=label, spec=spec, max_step=log.rows[-1][0])
        pipeline.receive(db, run, log.rows, [], track_progress=False)
        runs.append(run)
    if not runs:
        raise LogFormatError(source, "the trackio project holds no runs")
    return runs


def diagnose_path(path: Path, context: RunContext | None = None) -> Diagnosis:
    """Diagnose a log (or a run folder) without storing anything: what `grpodeck diagnose`
    prints. Completions parquet files next to it add the rollout signals."""
    log_path, completions = locate(path)
    rows = load_log(log_path).rows
    signals = [(s["step"], step_signals(s["groups"])) for s in load_completions(completions)
               ] if completions else []
    return diagnose(pipeline.merge_by_step(rows, signals), context)
