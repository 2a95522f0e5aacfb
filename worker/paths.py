"""Where this worker reads a spec's local models and datasets from: only inside its own directories.

The spec was checked by its letters (``grpodeck.contract.catalog.local_reference``) wherever it
was validated; only the host that reads the files can follow ``..`` and symlinks on its own disk,
so it confines every local reference again here, before reading (bug 4).
"""

from __future__ import annotations

from pathlib import Path

from grpodeck.contract.catalog import GLOB_CHARS, NAME_MAX, OutsideDirectory, outside_message


def confine(ref: str, root: Path, kind: str) -> Path:
    """Resolve ``ref`` against ``root`` (``..`` and symlinks followed) and insist it stays inside.

    Relative references are taken from ``root``, so ``prompts.jsonl`` means the file in the
    datasets directory whatever the process's working directory is. Never reads the file."""
    message = outside_message(kind)
    if not ref or GLOB_CHARS & set(ref) or "\\" in ref:
        raise OutsideDirectory(message)
    if any(len(part.encode("utf-8", "surrogatepass")) > NAME_MAX for part in ref.split("/")):
        raise OutsideDirectory(f"a local {kind} name is longer than any file system allows "
                               f"({NAME_MAX} bytes per name)")
    try:
        base = Path(root).resolve()
        target = (base / ref).resolve()
    except (OSError, ValueError, RuntimeError):  # NUL bytes, symlink loops, names too long
        raise OutsideDirectory(message) from None
    if target == base or not target.is_relative_to(base):
        raise OutsideDirectory(message)
    return target
