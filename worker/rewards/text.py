"""Text rewards: a full-match format pattern, an answer checked against a dataset column, and a
``custom`` reward imported by name on the worker (the browser never sends code to run)."""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import regex

from grpodeck.contract import custom_rewards
from grpodeck.contract.kinds import import_path, match_mode, regular_expression
from grpodeck.contract.text import completion_text
from worker.rewards.outcome import Outcome, report, short

MATCH_TIMEOUT_SECONDS = 1.0  # per completion: far above any sane format check (microseconds)
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")



def format_regex(pattern: str) -> Callable[..., list[float | None]]:
    """TRL reward: 1 when the whole completion matches ``pattern`` (anchored, ``.`` spans lines).

    The pattern is the user's and the text the model's: a pattern like ``(a|aa)+$`` backtracks
    exponentially on the wrong text, and Python's ``re`` cannot be interrupted. The ``regex``
    package (same syntax) takes a timeout, so one completion costs at most
    ``MATCH_TIMEOUT_SECONDS`` and scores 0 with the reason."""
    compiled = regex.compile(regular_expression(pattern), regex.DOTALL)

    def one(completion: Any) -> Outcome:
        try:
            matched = compiled.fullmatch(completion_text(completion),
                                         timeout=MATCH_TIMEOUT_SECONDS)
        except TimeoutError:
            return Outcome(0.0, f"format check timed out after {MATCH_TIMEOUT_SECONDS:g} s")
        return Outcome(1.0) if matched else Outcome(0.0, "does not match the format")

    def reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return report(reward, [one(c) for c in completions], kwargs)

    return reward


def extract_answer(text: str, mode: str) -> str | None:
    """The last <answer>...</answer>; else, numeric: the last number; exact: the last line."""
    tagged = ANSWER_TAG.findall(text)
    if tagged:
        text = tagged[-1]
        if mode == "exact":
            return text.strip()
    if mode == "numeric":
        numbers = NUMBER.findall(text)
        return numbers[-1] if numbers else None
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def same_answer(found: str, expected: Any, mode: str) -> bool:
    if mode == "exact":
        return found.strip() == str(expected).strip()
    a, b = _number(found), _number(str(expected))
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def answer_match(mode: str, column: str) -> Callable[..., list[float | None]]:
    """TRL reward: 1 when the extracted answer equals the row's ``column`` (exact or numeric)."""
    mode = match_mode(mode)

    def reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        expected = kwargs.get(column)
        if expected is None:
            raise ValueError(f"answer_match needs a {column!r} column in the dataset")
        outcomes = []
        for c, want in zip(completions, expected, strict=True):
            found = extract_answer(completion_text(c), mode)
            if found is None:
                outcomes.append(Outcome(0.0, "no answer found"))
            elif same_answer(found, want, mode):
                outcomes.append(Outcome(1.0))
            else:
                outcomes.append(Outcome(0.0, short(f"answer {found!r}, expected {str(want)!r}", 200)))
        return report(reward, outcomes, kwargs)

    return reward


def custom(path: str) -> Callable[..., list[float | None]]:
    """TRL reward imported on the worker, called exactly as TRL would call it.

    Only a function on this worker's allow-list is imported (``custom_rewards``): the web app
    checked the list already, but the worker's own deployment has the last word, and a spec
    that reached the queue some other way must not get ``os:system`` imported."""
    path = import_path(path)
    if not custom_rewards.is_allowed(path):
        raise ValueError(f"custom reward refused on this worker: it must be "
                         f"{custom_rewards.refusal(path)}")
    module_name, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"custom reward {path!r} is not importable on this worker: {exc}") from None
    if not callable(fn):
        raise TypeError(f"custom reward {path!r} is not a function")
    if not custom_rewards.defined_in_module(path, fn):
        raise ValueError(f"custom reward refused on this worker: {attr!r} is not defined in "
                         f"{module_name} (a module prefix opens the functions a module "
                         "defines, not the names it imports); list the exact path to allow it")

    def reward(*args: Any, **kwargs: Any) -> list[float | None]:
        return fn(*args, **kwargs)

    return reward
