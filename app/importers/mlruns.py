"""MLflow's file store (``mlruns/``), read by its documented layout; MLflow is not needed.

``mlruns/<experiment id>/<run id>/`` holds ``meta.yaml`` (``run_name: ...``) and
``metrics/<key>``, one file per metric (a key with ``/`` is nested folders:
``metrics/rewards/format_reward/mean``), one line per logged value:
``<timestamp ms> <value> <step>`` (very old stores wrote no step: the line's position is its
step then). ``params/<key>`` holds one parameter per file; the model's name is kept from them.
The experiment's ``meta.yaml`` (``name: ...``), one folder up, names the run's experiment.
The path may be the store, an experiment or a run folder; a store with several runs is refused
with their names (one run per import). ``.trash`` (deleted runs) is never read.
"""

from __future__ import annotations

from pathlib import Path

from app.importers.base import ImportedLog, LogFormatError, merge_rows
from app.importers.columns import logger_name

MAX_RUNS_LOOKED_AT = 10_000
MAX_METRIC_FILES = 2_000
MAX_FILE_BYTES = 256 * 1024 * 1024
MODEL_PARAMS = ("model_name_or_path", "model_name", "model", "base_model")


def _runs(folder: Path) -> list[Path]:
    """Run folders under ``folder`` (itself included): a ``meta.yaml`` beside ``metrics/``."""
    found = []
    for i, meta in enumerate(folder.rglob("meta.yaml")):
        if i >= MAX_RUNS_LOOKED_AT:
            break
        run = meta.parent
        if (run / "metrics").is_dir() and ".trash" not in run.relative_to(folder).parts:
            found.append(run)
    if (folder / "meta.yaml").is_file() and (folder / "metrics").is_dir():
        found.append(folder)
    return sorted(set(found))


def looks_like_folder(folder: Path) -> bool:
    """An MLflow store, experiment or run folder: some run folder under it."""
    return bool(_runs(folder))


def _meta_field(meta: Path, field: str) -> str | None:
    """A top-level ``field: value`` of a ``meta.yaml`` (MLflow writes flat YAML)."""
    try:
        text = meta.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{field}:"):
            return line.removeprefix(f"{field}:").strip().strip("'\"") or None
    return None


def _run_name(run: Path) -> str:
    return _meta_field(run / "meta.yaml", "run_name") or run.name


def _experiment_name(run: Path) -> str | None:
    """The run's experiment, from the experiment folder's ``meta.yaml`` (``name: ...``);
    None when the store was cut above the run (an uploaded run folder)."""
    return _meta_field(run.parent / "meta.yaml", "name")


def _points(file: Path) -> list[tuple[int, float]]:
    """(step, value) of a metric file's lines; a malformed line is skipped."""
    if file.stat().st_size > MAX_FILE_BYTES:
        raise LogFormatError(str(file), f"metric file larger than {MAX_FILE_BYTES} bytes")
    out = []
    lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    for n, line in enumerate(lines):
        parts = line.split()
        try:
            value = float(parts[1])
            step = int(parts[2]) if len(parts) > 2 else n
        except (IndexError, ValueError, OverflowError):
            continue
        out.append((step, value))
    return out


def _params(run: Path) -> dict[str, str]:
    out = {}
    for name in MODEL_PARAMS:
        file = run / "params" / name
        if file.is_file() and file.stat().st_size < 1000:
            out[name] = file.read_text(encoding="utf-8", errors="replace").strip()
    return out


def parse_folder(folder: Path) -> ImportedLog:
    """The one run's metrics under ``folder`` (see the module docstring)."""
    runs = _runs(folder)
    if len(runs) > 1:
        names = ", ".join(f"{r.relative_to(folder)} ({_run_name(r)})" for r in runs[:10])
        raise LogFormatError(str(folder), f"holds {len(runs)} MLflow runs ({names}): name one "
                                          "run's folder")
    run = runs[0]
    files = [f for f in sorted((run / "metrics").rglob("*")) if f.is_file()]
    if len(files) > MAX_METRIC_FILES:
        raise LogFormatError(str(run), f"more than {MAX_METRIC_FILES} metric files")
    rename: dict[str, str] = {}
    pairs = []
    for file in files:
        key = file.relative_to(run / "metrics").as_posix()
        name = logger_name(key)
        if name != key:
            rename[key] = name
        pairs += [(step, {name: value}) for step, value in _points(file)]
    meta: dict = {"mlflow_run": _run_name(run), **_params(run)}
    if experiment := _experiment_name(run):
        meta["mlflow_experiment"] = experiment
    return ImportedLog(rows=merge_rows(pairs), source_format="mlflow_file_store", meta=meta,
                       renames=rename)
