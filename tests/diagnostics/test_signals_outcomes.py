"""Rollout signals to the digit: group outcomes (NaN totals are no learning signal), the
per-step ``rollouts/*`` metrics, repetition, and the text rendering every view shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.rollouts.signals import group_outcome, repetition, step_signals
from grpodeck.contract.text import render_messages

REP, IDENT, EMPTY = "rollouts/repetition", "rollouts/identical_group_frac", "rollouts/empty_frac"


def group(*totals: object, texts: list[str] | None = None) -> dict:
    texts = texts if texts is not None else [f"t{i}" for i in range(len(totals))]
    return {"completions": [{"text": t, "total": r} for t, r in zip(texts, totals, strict=True)]}


@pytest.mark.parametrize("totals,outcome", [
    ((math.nan, math.nan), "all_fail"),
    ((math.nan, 1.0), "all_pass"),
    ((math.nan, 0.0, math.inf), "all_fail"),
    ((math.nan, 0.0, 1.0), "mixed"),
    ((-math.inf, 2.0, 2.0), "all_pass"),
    (("nan", "0.5"), "all_pass"),
])
def test_non_finite_totals_are_not_a_learning_signal(totals, outcome: str) -> None:
    assert group_outcome(group(*totals)) == outcome


@pytest.mark.parametrize("totals,outcome", [
    ((1.0, 1.0 + 1e-9), "all_pass"),  # within the zero-spread tolerance
    ((1.0, 1.0 + 1e-5), "mixed"),
    ((1000.0, 1000.0 + 1e-4), "all_pass"),  # tolerance scales with the totals
    ((1000.0, 1000.01), "mixed"),
    ((0.0, 1e-7), "all_pass"),  # equal at the unit scale, and above zero
    ((0.0, 0.0), "all_fail"),
    ((-1.0, -1.0), "all_fail"),
    ((-1000.0, -1000.0 - 1e-4), "all_fail"),
    ((-1000.0, -1000.01), "mixed"),
    ((0.5,), "all_pass"),
    ((0.0, 1e-6), "all_pass"),  # exactly the tolerance is still no spread
    ((0.0, 1.5e-6), "mixed"),  # the unit scale: 1e-6, not more
    # the scale is the larger magnitude of the two ends, whichever end it is
    ((1e6, 1e6 + 1.0000005), "all_pass"),
    ((-1e6 - 1.0000005, -1e6), "all_fail"),
])
def test_zero_spread_is_relative_to_the_scale(totals, outcome: str) -> None:
    assert group_outcome(group(*totals)) == outcome


def test_a_group_without_completions_is_all_fail() -> None:
    assert group_outcome({"completions": []}) == "all_fail"
    assert group_outcome({}) == "all_fail"
    assert group_outcome({"completions": None}) == "all_fail"


def test_step_signals_to_the_digit() -> None:
    groups = [
        group(0.0, 0.0, texts=["same", " same "]),  # identical after stripping
        group(0.0, 1.0, texts=["one answer here", ""]),
        group(0.0, texts=["alone"]),  # a single completion is never "identical"
        group(0.0, 0.0, texts=["   ", "go go go go go"]),
    ]
    out = step_signals(groups)
    assert out[IDENT] == pytest.approx(1 / 4)
    assert out[EMPTY] == pytest.approx(2 / 7)
    # non-empty: same, same, one answer here, alone, go go go go go -> only the last repeats
    assert out[REP] == pytest.approx((1 - 1 / 3) / 5)
    assert set(out) == {IDENT, EMPTY, REP}


def test_step_signals_of_nothing() -> None:
    assert step_signals([]) == {}
    assert step_signals([{"completions": []}, {}]) == {}
    only_empty = step_signals([group(0.0, 0.0, texts=["", "  "])])
    assert only_empty == {IDENT: 1.0, EMPTY: 1.0, REP: 0.0}


def test_missing_text_counts_as_empty() -> None:
    out = step_signals([{"completions": [{"text": None}, {"total": 1.0}, {"text": "ok"}]}])
    assert out[EMPTY] == pytest.approx(2 / 3) and out[IDENT] == 0.0


@pytest.mark.parametrize("text,value", [
    ("a b", 0.0),
    ("a b c", 0.0),  # three words: one 3-gram
    ("a b c a b c", 1 - 3 / 4),
    ("abcdefg", 0.0),  # seven characters: too short for character n-grams
    ("abababab", 1 - 2 / 5),  # eight: character 4-grams
    ("ab ab ab ab", 1 - 1 / 2),  # four words: the 3-gram (ab ab ab) twice
    ("abab abab", 1 - 2 / 5),  # two words: their characters joined without the space
    ("abababab abababab abababab", 0.0),  # three words: one word 3-gram, no repeat
    ("", 0.0),
])
def test_repetition_windows(text: str, value: float) -> None:
    assert repetition(text) == pytest.approx(value)


def test_render_messages_shapes() -> None:
    msgs = [{"role": "user", "content": "Hi"}, {"content": "there"}, "not a message"]
    assert render_messages(msgs) == "user: Hi\n?: there"
    assert render_messages(msgs, roles=False) == "Hithere"
    assert render_messages({"role": "assistant", "content": "A"}) == "assistant: A"
    parts = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"},
                                          "junk", {"type": "text", "text": "!"}]}]
    assert render_messages(parts) == "user: look!"
    as_array = [{"role": "user", "content": np.array([{"type": "text", "text": "arr"}],
                                                      dtype=object)}]
    assert render_messages(as_array) == "user: arr"
    assert render_messages([{"role": "user", "content": None}]) == "user: "
    assert render_messages([{"role": "user", "content": 42}]) == "user: 42"
    assert render_messages(7) == "7"
    assert render_messages(None) == ""
    assert render_messages([]) == ""
