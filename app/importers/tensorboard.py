"""TensorBoard event files and folders: scalars by tag and step.

The default logger of many cluster setups: verl's and OpenRLHF's ``tensorboard`` logger, TRL's
``report_to="tensorboard"`` (tags ``train/reward``, ``train/kl``, ...). Read with
TensorBoard's own ``EventAccumulator`` (the ``tensorboard`` package, which needs no
TensorFlow), every scalar kept (``size_guidance`` 0: no reservoir sampling). Both ways of
writing a scalar are read: ``simple_value`` (``torch.utils.tensorboard``, tensorboardX) and a
rank-0 tensor under the ``scalars`` plugin (TF2's ``tf.summary.scalar``).

A folder may hold one run's events (files directly in it, or in the one sub-folder that has
any); a folder with several runs' events is refused with their names: one run per import.
Tag names are cleaned like every tracker's (``train/reward`` -> ``reward``,
``eval/loss`` -> ``eval_loss``); trainer vocabularies apply after.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from app.importers.base import JSON_LIKE_ERRORS, ImportedLog, LogFormatError, merge_rows
from app.importers.columns import logger_name

FILE_VERSION = b"brain.Event:"  # the first record of every event file says its version
MAX_FILES = 10_000
# everything but scalars is skipped (0 = keep all, as the tensorboard docs say)
SIZE_GUIDANCE = {"scalars": 0, "tensors": 0, "histograms": 1, "images": 1,
                 "audio": 1, "compressedHistograms": 1}


def looks_like_bytes(raw: bytes) -> bool:
    """An event file: its first record (after a 12-byte header) names ``brain.Event:N``."""
    return FILE_VERSION in raw[:64]


def _event_dirs(folder: Path) -> list[Path]:
    dirs: set[Path] = set()
    for i, path in enumerate(folder.rglob("*tfevents*")):
        if i >= MAX_FILES:
            break
        if path.is_file():
            dirs.add(path.parent)
    return sorted(dirs)


def looks_like_folder(folder: Path) -> bool:
    """Some file under the folder is named like an event file (``*tfevents*``)."""
    return bool(_event_dirs(folder))


def _errors() -> tuple[type[BaseException], ...]:
    from google.protobuf.message import DecodeError
    from tensorboard.compat.tensorflow_stub import errors

    return (errors.OpError, DecodeError, OSError, KeyError, AttributeError, IndexError,
            *JSON_LIKE_ERRORS)


def _scalars(accumulator: object) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value)]} for both kinds of scalar summary."""
    from tensorboard.util import tensor_util

    tags = accumulator.Tags()  # type: ignore[attr-defined]
    out = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]  # type: ignore[attr-defined]
           for tag in tags.get("scalars", [])}
    for tag in tags.get("tensors", []):
        meta = accumulator.SummaryMetadata(tag)  # type: ignore[attr-defined]
        if meta.plugin_data.plugin_name != "scalars":
            continue
        values = []
        for event in accumulator.Tensors(tag):  # type: ignore[attr-defined]
            array = tensor_util.make_ndarray(event.tensor_proto)
            if array.size == 1:
                values.append((event.step, float(array.reshape(()))))
        out.setdefault(tag, values)
    return out


def _read(path: Path, where: str) -> ImportedLog:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    try:
        accumulator = EventAccumulator(str(path), size_guidance=SIZE_GUIDANCE)
        accumulator.Reload()
        scalars = _scalars(accumulator)
    except _errors() as exc:
        raise LogFormatError(where, f"unreadable TensorBoard events ({type(exc).__name__})"
                             ) from None
    if not scalars:
        raise LogFormatError(where, "TensorBoard events hold no scalars")
    rename = {tag: logger_name(tag) for tag in scalars if logger_name(tag) != tag}
    pairs = [(step, {logger_name(tag): value}) for tag, points in scalars.items()
             for step, value in points]
    return ImportedLog(rows=merge_rows(pairs), source_format="tensorboard",
                       meta={"tags": len(scalars)}, renames=rename)


def parse_file(path: Path) -> ImportedLog:
    """One event file, whatever its name (an upload is saved under a name of our own, and
    TensorBoard's loader recognises event files by ``tfevents`` in the name)."""
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / "events.out.tfevents.0.upload"
        link.symlink_to(path.resolve())
        return _read(link, str(path))


def parse_folder(folder: Path) -> ImportedLog:
    """The one run's events under ``folder`` (see the module docstring)."""
    dirs = _event_dirs(folder)
    if len(dirs) > 1:
        names = ", ".join(str(d.relative_to(folder)) for d in dirs[:10])
        raise LogFormatError(str(folder), f"holds TensorBoard events of {len(dirs)} runs "
                                          f"({names}): name one run's folder")
    log = _read(dirs[0], str(folder))
    if dirs[0] != folder:  # the run's own sub-folder (TRL: runs/<date>_<host>) names it
        log.meta["events_folder"] = dirs[0].relative_to(folder).as_posix()
    return log
