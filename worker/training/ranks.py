"""Which process of a run on many devices this is, and what a failed one leaves behind.

Under ``accelerate launch`` (torchrun) each training process gets ``RANK`` and ``WORLD_SIZE``;
a plain child has neither and is rank 0 of 1. Only rank 0 reports (metrics, rollouts, stages);
the others train silently.

A rank that raises writes its traceback to ``ranks/rank<N>.error`` in the run folder besides
stderr. All ranks share one stderr file, where the failing rank's traceback is followed by
the others' (a broken collective: "Connection closed by peer") and torchrun's summary
(``ChildFailedError``): the supervisor reports the first rank that failed, whose error is
the cause, not that noise.
"""

from __future__ import annotations

import os
from pathlib import Path

ERRORS_DIR = "ranks"


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main() -> bool:
    return rank() == 0


def record_failure(output_dir: str | Path, text: str) -> None:
    """Keep this rank's traceback where the supervisor looks (only under a launcher)."""
    if world_size() < 2:
        return
    folder = Path(output_dir) / ERRORS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank{rank()}.error").write_text(text)


def first_failure(output_dir: Path) -> tuple[int, str] | None:
    """(rank, traceback) of the rank that failed first, or None when no rank recorded one."""
    folder = output_dir / ERRORS_DIR
    found = sorted(folder.glob("rank*.error"), key=lambda p: (p.stat().st_mtime_ns, p.name)) \
        if folder.is_dir() else []
    for path in found:
        try:
            return int(path.stem.removeprefix("rank")), path.read_text(errors="replace")
        except ValueError:
            continue
    return None
