"""What a run made elsewhere is called when the user gives it no name.

Why: the last part of the path is often a name every run shares: TRL logs TensorBoard events
to ``<output_dir>/runs/<date>_<host>``, MLflow keeps ``mlruns/``, scripts write to ``logs/`` or
``output/``. Named after that, ten imported runs were ten runs called "runs" (issue 56). So an
MLflow run is called what MLflow calls it (experiment and run name), and a generic folder name
gives way to the run's own sub-folder (where its events are) or to the nearest folder above it
with a name of its own. An upload's temporary folders are the server's, never a name.
"""

from __future__ import annotations

from pathlib import Path

from app.importers import ImportedLog
from grpodeck.contract.fields import cleaned

MAX_NAME = 120  # what a run record holds
GENERIC_LOGS = frozenset({"trainer_state.json", "log.txt", "train.log", "console.log",
                          "metrics.jsonl", "log_history.json", "log.jsonl"})
GENERIC_FOLDERS = frozenset({"runs", "run", "logs", "log", "mlruns", "tb", "tensorboard",
                             "tb_logs", "tensorboard_logs", "output", "outputs", "events",
                             "lightning_logs", "wandb"})
MAX_CLIMB = 4  # folders looked at above the one named: past them, nothing is the run's
DEFAULT_EXPERIMENT = "Default"  # MLflow's experiment for runs that name none


def is_generic(name: str) -> bool:
    """A folder name many runs share (``runs``, ``logs``, ``output``, ``checkpoint-40``)."""
    return name.lower() in GENERIC_FOLDERS or name.startswith("checkpoint-")


def folder_name(path: Path, inner: Path | None = None, top: Path | None = None) -> str:
    """A run folder's name: its own, unless generic; then the run's sub-folder ``inner``
    (where its events are), else the nearest folder above with a name of its own, never
    ``top`` (an upload's temporary folder) or anything above it; else the generic name."""
    path = path.resolve()
    if not is_generic(path.name):
        return path.name
    if inner is not None and not is_generic(inner.name):
        return inner.name
    top = top.resolve() if top is not None else None
    for above in list(path.parents)[:MAX_CLIMB]:
        if top is not None and (above == top or not above.is_relative_to(top)):
            break
        if above.name and not is_generic(above.name):
            return above.name
    return path.name


def mlflow_name(experiment: str | None, run: str, given: str | None = None) -> str:
    """``<experiment>/<run>`` as MLflow shows a run (its ``Default`` experiment adds nothing),
    or ``<given>/<run>`` for a store the user named."""
    prefix = given or (experiment if experiment and experiment != DEFAULT_EXPERIMENT else None)
    return cleaned(f"{prefix}/{run}" if prefix else run)[:MAX_NAME]


def default_name(path: Path, log_path: Path, source_name: str | None, log: ImportedLog,
                 top: Path | None = None) -> str:
    """The name of the run read from ``path`` (``log_path``: the file read, ``source_name``:
    an upload's file name, ``top``: the folder an upload was unpacked into): MLflow's name for
    an MLflow run; a folder's (``folder_name``); the run folder of a generic log like
    ``trainer_state.json`` or a TensorBoard event file; else the file's name without its
    extension."""
    if isinstance(run := log.meta.get("mlflow_run"), str):
        experiment = log.meta.get("mlflow_experiment")
        return mlflow_name(experiment if isinstance(experiment, str) else None, run)
    if path.is_dir():
        events = log.meta.get("events_folder")
        inner = path / events if isinstance(events, str) else None
        return folder_name(path, inner, top)
    file_name = source_name or log_path.name
    if source_name is None and (file_name.lower() in GENERIC_LOGS
                                or log.source_format == "tensorboard"):
        return folder_name(log_path.parent, None, top)
    stem = Path(file_name).stem
    return stem if stem and file_name.lower() not in GENERIC_LOGS else file_name
