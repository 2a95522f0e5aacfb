"""The training arguments a TRL output folder keeps: ``max_completion_length`` and the rest.

``Trainer`` saves its arguments as ``training_args.bin``: a *pickled* ``GRPOConfig``. Unpickling
an arbitrary file runs arbitrary code, so it is read with ``torch.load(weights_only=True)``,
which refuses every class not allowed explicitly. We allow only what a TrainingArguments pickle
is made of: classes from transformers, TRL and accelerate that are enums, dataclasses, or plain
objects restored by setting their attributes (no ``__setstate__``, so no code of theirs runs).
Anything else (a custom subclass from the user's script, a tampered file) is refused with the
reason, and the caller carries on without the arguments. A saved JSON of the arguments
(``training_args.json``, ``args.json``) is read as plain data.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import math
from pathlib import Path
from typing import Any

ARGS_BIN = "training_args.bin"
ARGS_JSON = ("training_args.json", "args.json")
TRUSTED_ROOTS = frozenset({"transformers", "trl", "accelerate"})
# What a diagnosis or a run record uses from the arguments.
KEYS = ("max_completion_length", "max_prompt_length", "num_generations", "beta",
        "learning_rate", "logging_steps", "max_steps", "num_train_epochs",
        "per_device_train_batch_size", "gradient_accumulation_steps", "temperature",
        "loss_type", "scale_rewards", "reward_weights", "seed")


class ConfigRefused(ValueError):
    """The arguments file exists but was not read (unsafe or unreadable); says why."""


def _allowed(name: str) -> type:
    """The class ``name`` (module.attr) when a TrainingArguments pickle may contain it."""
    module, _, attr = name.rpartition(".")
    if module.split(".")[0] not in TRUSTED_ROOTS:
        raise ConfigRefused(f"{ARGS_BIN} needs {name}, which is not from transformers/TRL")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigRefused(f"{ARGS_BIN} needs {name}, which is not installed here") from exc
    plain = isinstance(cls, type) and not hasattr(cls, "__setstate__")
    if not (isinstance(cls, type) and (issubclass(cls, enum.Enum)
                                       or dataclasses.is_dataclass(cls) or plain)):
        raise ConfigRefused(f"{ARGS_BIN} needs {name}, which is not a plain data class")
    return cls


def load_training_args(path: Path) -> dict[str, Any]:
    """The plain-valued arguments in ``training_args.bin``; raises ConfigRefused."""
    try:
        import torch
    except ImportError as exc:
        raise ConfigRefused(f"{ARGS_BIN} needs torch to be read") from exc
    try:
        needed = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
        with torch.serialization.safe_globals([_allowed(n) for n in needed]):
            args = torch.load(str(path), weights_only=True, map_location="cpu")
    except ConfigRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad or hostile file
        raise ConfigRefused(f"{ARGS_BIN} is not readable: {str(exc)[:200]}") from None
    return plain_args(vars(args) if hasattr(args, "__dict__") else args)


def plain_args(data: object) -> dict[str, Any]:
    """The ``KEYS`` whose values are plain numbers, strings or lists of numbers."""
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {}
    for key in KEYS:
        value = data.get(key)
        if isinstance(value, enum.Enum):
            value = value.value
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            continue
        if isinstance(value, int | float | str) or (
                isinstance(value, list) and all(isinstance(v, int | float) for v in value)):
            out[key] = value
    return out


def read_run_config(folders: list[Path]) -> tuple[dict[str, Any], str | None]:
    """(arguments, why none were read) from the first folder holding an arguments file;
    ``({}, None)`` when there is none at all."""
    for folder in folders:
        for name in ARGS_JSON:
            if (folder / name).is_file():
                try:
                    return plain_args(json.loads((folder / name).read_text())), None
                except (OSError, ValueError) as exc:
                    return {}, f"{name} is not readable JSON: {exc}"
        if (folder / ARGS_BIN).is_file():
            try:
                return load_training_args(folder / ARGS_BIN), None
            except ConfigRefused as exc:
                return {}, str(exc)
    return {}, None
