"""Store a training run made elsewhere as an imported run, with the same charts, findings and
rollouts as a launched one: its log (trainer_state.json, JSON/JSONL rows, console log) and, when
TRL wrote them (``log_completions=True``), its ``completions/completions_<step>.parquet`` files."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.core.db import write
from app.diagnostics import Diagnosis, RunContext, diagnose
from app.importers import ImportedLog, LogFormatError, load_log, mlflow_db, trackio
from app.importers.completions import load_completions
from app.importers.detect import translate
from app.importers.read_report import renames_text
from app.importers.run_config import read_run_config
from app.imports import saved_mappings
from app.imports.naming import default_name, mlflow_name
from app.ingest import pipeline
from app.metrics.reading import Reading
from app.rollouts.signals import step_signals
from app.run_page import removal
from app.runs import service
from app.runs.models import Run
from grpodeck.contract.fields import cleaned
from grpodeck.contract.wire import RolloutStep

logger = logging.getLogger(__name__)


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
        if not existing:  # TensorBoard events, mlruns/, a W&B run: load_log reads or refuses
            return path, None
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


MODEL_KEYS = ("model_name_or_path", "model_name", "model", "base_model", "_name_or_path")


def known_model(*sources: dict, folders: tuple[Path, ...] = ()) -> str | None:
    """The model a run trained, when anything saved with it says: a model key in its log's
    settings or arguments, else ``_name_or_path`` in a saved model's ``config.json``."""
    for source in sources:
        for key in MODEL_KEYS:
            value = source.get(key)
            if isinstance(value, str) and value.strip():
                return cleaned(value.strip())[:200]
    for folder in folders:
        try:
            saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(saved, dict) and (found := known_model(saved)):
            return found
    return None


def run_config(path: Path, log_path: Path) -> tuple[dict, str | None]:
    """The training arguments saved next to the log (``training_args.bin`` or a JSON of
    them), for a folder only: an uploaded or named file has no folder of its own."""
    if not path.is_dir():
        return {}, None
    return read_run_config([path] if log_path == path else [path, log_path.parent])


def context_from(config: dict, base: RunContext | None = None) -> RunContext:
    """``base`` with the settings the folder's arguments know and ``base`` does not."""
    ctx = base or RunContext()
    for key in ("max_completion_length", "beta", "num_generations"):
        if getattr(ctx, key) is None and isinstance(config.get(key), int | float):
            setattr(ctx, key, config[key])
    return ctx


def keep_reading(run: Run, log: ImportedLog) -> None:
    """Keep how the log's keys were read (``translate``'s reading) with its run: the run page
    lists the renames as "read as", as it does for a live run."""
    reading = log.meta.get("reading")
    if isinstance(reading, Reading) and reading != Reading():
        run.metric_reading = reading.as_json()


@dataclass
class ReadRun:
    """A run read from its files, ready to store. Every file is read before the store is
    touched: a large log takes seconds to read, and no transaction may stay open meanwhile
    (issue 55)."""

    name: str
    spec: dict
    log: ImportedLog
    rollout_steps: list[RolloutStep] = field(default_factory=list)


def read_log(path: Path, name: str | None = None, source_name: str | None = None,
             completions: Path | None = None, mapping: dict[str, str] | None = None,
             upload_root: Path | None = None) -> ReadRun:
    """The run a log (or a run folder) holds, read without the database. Raises
    app.importers.LogFormatError when a file can't be read. ``upload_root``: the folder an
    uploaded archive was unpacked into (no folder at or above it names a run)."""
    log_path, found = locate(path)
    completions = completions or found
    log = load_log(log_path, mapping=mapping)
    config, refused = run_config(path, log_path)
    rollout_steps = ([RolloutStep.model_validate(s) for s in load_completions(completions)]
                     if completions else [])
    spec = {"source_file": source_name or log_path.name, "source_format": log.source_format,
            "rollout_steps": len(rollout_steps), **_storable_meta(log.meta),
            **_storable_meta(config), **({"config_not_read": refused} if refused else {})}
    if log.renames:  # what the run page's "read as" shows, in the original names
        spec["read_as"] = cleaned(renames_text(log.renames))[:2000]
    # an upload's temporary copy has no folder of its own to read
    folders = (log_path.parent, log_path.parent.parent) if source_name is None else ()
    if model := known_model(log.meta, config, folders=folders):
        spec["model"] = model
    return ReadRun(name or default_name(path, log_path, source_name, log, upload_root), spec,
                   log, rollout_steps)


def store_run(db: Session, read: ReadRun, created_by: int | None = None) -> Run:
    """Store a read run, committed, in short transactions: the run, then its rows in batches
    (``pipeline.receive_import``), so heartbeats and metric reports write in between. A
    failure part-way removes the run again: no half-imported run stays behind."""
    with write(db):
        run = service.create_imported_run(db, name=read.name, spec=read.spec,
                                          max_step=read.log.rows[-1][0])
        run.created_by_id = created_by
        keep_reading(run, read.log)
    try:
        return pipeline.receive_import(db, run.id, read.log.rows, read.rollout_steps)
    except Exception:
        _remove(db, run.id)
        raise


def _remove(db: Session, run_id: int) -> None:
    """Delete a run whose import failed part-way; best effort (the failure is what is
    raised)."""
    db.rollback()
    try:
        with write(db):
            if (run := db.get(Run, run_id)) is not None:
                removal.delete_run(db, run)
    except SQLAlchemyError:
        logger.exception("could not remove run %s after its import failed", run_id)


def import_log(db: Session, path: Path, name: str | None = None,
               source_name: str | None = None, completions: Path | None = None,
               mapping: dict[str, str] | None = None) -> Run:
    """Read a log, then store it as a run (committed). Raises app.importers.LogFormatError
    (nothing stored) when a file can't be read.

    ``source_name`` is the file's original name when ``path`` is an upload's temporary copy;
    ``mapping`` renames log keys to canonical names (``Reward=reward``). A folder's run is
    named after the folder and keeps its saved training arguments in its spec.
    """
    return store_run(db, read_log(path, name, source_name, completions, mapping))


def import_path(db: Session, path: Path, name: str | None = None,
                source_name: str | None = None, completions: Path | None = None,
                mapping: dict[str, str] | None = None, save_mapping: bool = False,
                mapping_source: str | None = None, created_by: int | None = None,
                upload_root: Path | None = None) -> list[Run]:
    """A log as one run, or a trackio project (its SQLite file) as one run per trackio run,
    each named ``<name or file>/<trackio run>``, committed. Raises LogFormatError; nothing is
    stored then. Every file is read before anything is written (``ReadRun``).

    Without a ``mapping``, the one the importing user (``created_by``, None: no account)
    remembered for this source name (the file's or folder's) is used; ``save_mapping``
    remembers the given one for their next log of that source (``mapping_source``: the name to
    remember it under, when not the file's, as for an uploaded archive; ``upload_root``: the
    folder it was unpacked into, above which no folder names the run)."""
    source = mapping_source or source_name or path.name
    given = mapping or {}
    mapping, reused = _mapping_for(db, source, given, save_mapping, created_by)
    found = _read_runs(path, name, source_name, completions, mapping, upload_root)
    if reused:  # the run says where its mapping came from
        for read in found:
            read.spec["mapping_saved_for"] = saved_mappings.source_key(source)
    if save_mapping:
        with write(db):
            saved_mappings.remember(db, source, given, created_by)
    return [store_run(db, read, created_by) for read in found]


def _mapping_for(db: Session, source: str, given: dict[str, str], save: bool,
                 user_id: int | None) -> tuple[dict[str, str], bool]:
    """``saved_mappings.resolve`` without its write: (the mapping to read with, whether it is
    the remembered one). A mapping to remember is written once the log was read: written
    first, its transaction held the store through the whole parse (issue 55)."""
    if save:  # the given one is read, and replaces (or, empty, forgets) the remembered one
        return given, False
    found = saved_mappings.resolve(db, source, given, False, user_id)
    db.commit()  # a read only: no transaction stays open through the parse (PostgreSQL)
    return found


def _read_runs(path: Path, name: str | None, source_name: str | None,
               completions: Path | None, mapping: dict[str, str],
               upload_root: Path | None = None) -> list[ReadRun]:
    if mlflow_db.looks_like(path):  # before trackio's check: both are SQLite files
        return _read_mlflow_runs(path, name, source_name or path.name, mapping)
    if not trackio.looks_like(path):
        return [read_log(path, name, source_name, completions, mapping, upload_root)]
    source = source_name or path.name
    found = [_read_trackio_run(path, run_name, name, source, mapping)
             for run_name in trackio.run_names(path)]
    if not found:
        raise LogFormatError(source, "the trackio project holds no runs")
    return found


def _read_trackio_run(path: Path, run_name: str, name: str | None, source: str,
                      mapping: dict[str, str]) -> ReadRun:
    log = translate(trackio.parse(path, run_name), mapping)
    spec = {"source_file": source, "source_format": log.source_format,
            "trackio_run": cleaned(run_name)[:200], **_storable_meta(log.meta)}
    if model := known_model(log.meta):
        spec["model"] = model
    return ReadRun(cleaned(f"{name or Path(source).stem}/{run_name}")[:120], spec, log)


def _read_mlflow_runs(path: Path, name: str | None, source: str,
                      mapping: dict[str, str]) -> list[ReadRun]:
    """One run per MLflow run of an ``mlflow.db``, each named ``<experiment>/<run>`` (the
    names the user sees in MLflow; MLflow's ``Default`` experiment adds nothing), or
    ``<name>/<run>`` when a name was given."""
    found = mlflow_db.runs(path)
    if not found:
        raise LogFormatError(source, "the MLflow store holds no run that logged a metric")
    return [_read_mlflow_run(path, run, name, source, mapping) for run in found]


def _read_mlflow_run(path: Path, run: mlflow_db.MlflowRun, name: str | None, source: str,
                     mapping: dict[str, str]) -> ReadRun:
    log = translate(mlflow_db.parse(path, run), mapping)
    spec = {**_storable_meta(log.meta), "source_file": source,
            "source_format": log.source_format}
    if log.renames:
        spec["read_as"] = cleaned(renames_text(log.renames))[:2000]
    if model := known_model(log.meta):
        spec["model"] = model
    return ReadRun(mlflow_name(run.experiment, run.name, name), spec, log)


def diagnose_path(path: Path, context: RunContext | None = None,
                  mapping: dict[str, str] | None = None) -> Diagnosis:
    """Diagnose a log (or a run folder) without storing anything: what `grpodeck diagnose`
    prints."""
    return read_and_diagnose(path, context, mapping)[0]


def read_and_diagnose(path: Path, context: RunContext | None = None,
                      mapping: dict[str, str] | None = None) -> tuple[Diagnosis, ImportedLog]:
    """The diagnosis and the log it was made from (what was read, under which names).
    Completions parquet files next to it add the rollout signals; a folder's saved training
    arguments fill in what ``context`` leaves unset (``max_completion_length``)."""
    log_path, completions = locate(path)
    log = load_log(log_path, mapping=mapping)
    config, _ = run_config(path, log_path)
    signals = [(s["step"], step_signals(s["groups"])) for s in load_completions(completions)
               ] if completions else []
    diagnosis = diagnose(pipeline.merge_by_step(log.rows, signals), context_from(config, context))
    return diagnosis, log
