"""Store a training run made elsewhere as an imported run, with the same charts, findings and
rollouts as a launched one: its log (trainer_state.json, JSON/JSONL rows, console log) and, when
TRL wrote them (``log_completions=True``), its ``completions/completions_<step>.parquet`` files."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sqlalchemy.orm import Session

from app.diagnostics import Diagnosis, RunContext, diagnose
from app.importers import ImportedLog, LogFormatError, load_log, trackio
from app.importers.completions import load_completions
from app.importers.detect import translate
from app.importers.read_report import renames_text
from app.importers.run_config import read_run_config
from app.imports import saved_mappings
from app.ingest import pipeline
from app.metrics.reading import Reading
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


def folder_name(path: Path) -> str:
    """A run folder's name (``out/checkpoint-40`` is the run ``out``)."""
    path = path.resolve()
    return path.parent.name if path.name.startswith("checkpoint-") else path.name


GENERIC_LOGS = frozenset({"trainer_state.json", "log.txt", "train.log", "console.log",
                          "metrics.jsonl", "log_history.json", "log.jsonl"})
MODEL_KEYS = ("model_name_or_path", "model_name", "model", "base_model", "_name_or_path")


def default_name(path: Path, log_path: Path, source_name: str | None) -> str:
    """What a run made elsewhere is called when the user gave no name: its run folder (the
    folder named, or the one holding a generic log like ``trainer_state.json``), else the
    uploaded file's name without its extension."""
    if path.is_dir():
        return folder_name(path)
    file_name = source_name or log_path.name
    if source_name is None and file_name.lower() in GENERIC_LOGS:
        return folder_name(log_path.parent)
    stem = Path(file_name).stem
    return stem if stem and file_name.lower() not in GENERIC_LOGS else file_name


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


def import_log(db: Session, path: Path, name: str | None = None,
               source_name: str | None = None, completions: Path | None = None,
               mapping: dict[str, str] | None = None) -> Run:
    """Raises app.importers.LogFormatError (nothing stored) when a file can't be read.

    ``source_name`` is the file's original name when ``path`` is an upload's temporary copy;
    ``mapping`` renames log keys to canonical names (``Reward=reward``). A folder's run is
    named after the folder and keeps its saved training arguments in its spec.
    """
    log_path, found = locate(path)
    completions = completions or found
    log = load_log(log_path, mapping=mapping)
    config, refused = run_config(path, log_path)
    rollout_steps = ([RolloutStep.model_validate(s) for s in load_completions(completions)]
                     if completions else [])
    last_step = log.rows[-1][0]
    spec = {"source_file": source_name or log_path.name, "source_format": log.source_format,
            "rollout_steps": len(rollout_steps), **_storable_meta(log.meta),
            **_storable_meta(config), **({"config_not_read": refused} if refused else {})}
    if log.renames:  # what the run page's "read as" shows, in the original names
        spec["read_as"] = cleaned(renames_text(log.renames))[:2000]
    default = default_name(path, log_path, source_name)
    # an upload's temporary copy has no folder of its own to read
    folders = (log_path.parent, log_path.parent.parent) if source_name is None else ()
    if model := known_model(log.meta, config, folders=folders):
        spec["model"] = model
    run = service.create_imported_run(db, name=name or default, spec=spec,
                                      max_step=last_step)
    keep_reading(run, log)
    pipeline.receive(db, run, log.rows, rollout_steps, track_progress=False)
    return run


def import_path(db: Session, path: Path, name: str | None = None,
                source_name: str | None = None, completions: Path | None = None,
                mapping: dict[str, str] | None = None, save_mapping: bool = False,
                mapping_source: str | None = None) -> list[Run]:
    """A log as one run, or a trackio project (its SQLite file) as one run per trackio run,
    each named ``<name or file>/<trackio run>``. Raises LogFormatError; nothing is stored then.

    Without a ``mapping``, the one remembered for this source name (the file's or folder's)
    is used; ``save_mapping`` remembers the given one for the next log of that source
    (``mapping_source``: the name to remember it under, when not the file's, as for an
    uploaded archive)."""
    source = mapping_source or source_name or path.name
    mapping, reused = saved_mappings.resolve(db, source, mapping or {}, save_mapping)
    runs = _import_runs(db, path, name, source_name, completions, mapping)
    if reused:  # the run says where its mapping came from
        for run in runs:
            run.spec = {**run.spec, "mapping_saved_for": saved_mappings.source_key(source)}
    return runs


def _import_runs(db: Session, path: Path, name: str | None, source_name: str | None,
                 completions: Path | None, mapping: dict[str, str]) -> list[Run]:
    if not trackio.looks_like(path):
        return [import_log(db, path, name, source_name, completions, mapping)]
    source = source_name or path.name
    runs = []
    for run_name in trackio.run_names(path):
        log = translate(trackio.parse(path, run_name), mapping)
        spec = {"source_file": source, "source_format": log.source_format,
                "trackio_run": cleaned(run_name)[:200], **_storable_meta(log.meta)}
        if model := known_model(log.meta):
            spec["model"] = model
        label = cleaned(f"{name or Path(source).stem}/{run_name}")[:120]
        run = service.create_imported_run(db, name=label, spec=spec, max_step=log.rows[-1][0])
        keep_reading(run, log)
        pipeline.receive(db, run, log.rows, [], track_progress=False)
        runs.append(run)
    if not runs:
        raise LogFormatError(source, "the trackio project holds no runs")
    return runs


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
