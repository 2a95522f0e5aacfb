"""Importers under hypothesis: any bytes give either a clear ``LogFormatError`` or rows, and
well-formed logs come back exactly, later values winning over earlier ones at a step."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.importers import LogFormatError, load_log

# Metric names that no TRL renaming touches, so the expected row is the row written.
NAMES = st.sampled_from(["reward", "loss", "kl", "entropy", "grad_norm", "reward_std",
                         "frac_reward_zero_std", "completions/mean_length", "eval_reward"])
VALUES = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=32),
                   st.integers(-10**6, 10**6))
STEPS = st.integers(0, 10_000)


@contextmanager
def written(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.txt"
        path.write_bytes(data)
        yield path


def check_rows(rows: list) -> None:
    assert rows, "an accepted log holds at least one row"
    steps = [s for s, _ in rows]
    assert steps == sorted(set(steps))
    for step, metrics in rows:
        assert isinstance(step, int) and metrics
        assert all(isinstance(k, str) and type(v) is float for k, v in metrics.items())


def load_or_reason(data: bytes) -> list | str:
    with written(data) as path:
        try:
            log = load_log(path)
        except LogFormatError as exc:
            assert exc.reason.strip() and str(path) in str(exc)
            return exc.reason
    check_rows(log.rows)
    return log.rows


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_any_bytes_give_rows_or_a_clear_error(data: bytes) -> None:
    load_or_reason(data)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["step", "global_step", "reward", "loss", "log_history", "x",
                         "train_runtime", "rewards/acc"]), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=150)
@given(JSONISH, st.sampled_from(["json", "jsonl", "repr"]))
def test_any_json_shaped_text_gives_rows_or_a_clear_error(doc: object, form: str) -> None:
    if form == "json":
        text = json.dumps(doc)
    elif form == "jsonl":
        items = doc if isinstance(doc, list) else [doc]
        text = "\n".join(json.dumps(item) for item in items)
    else:  # what a console log prints
        text = f"INFO step\n{doc!r}\n"
    load_or_reason(text.encode())


ENTRIES = st.lists(st.tuples(STEPS, st.dictionaries(NAMES, VALUES, min_size=1, max_size=4)),
                   min_size=1, max_size=25)


def expected_rows(entries: list[tuple[int, dict]]) -> list[tuple[int, dict[str, float]]]:
    """Written down independently: per step, each metric's last logged value."""
    merged: dict[int, dict[str, float]] = {}
    for step, metrics in entries:
        for name, value in metrics.items():
            merged.setdefault(step, {})[name] = float(value)
    return sorted(merged.items())


@settings(max_examples=100)
@given(ENTRIES, st.sampled_from(["jsonl", "json_list", "trainer_state"]))
def test_well_formed_logs_come_back_and_the_later_value_wins(entries: list, form: str) -> None:
    dicts = [{"step": step, **metrics} for step, metrics in entries]
    if form == "jsonl":
        text = "\n".join(json.dumps(d) for d in dicts)
    elif form == "json_list":
        text = json.dumps(dicts)
    else:
        text = json.dumps({"global_step": max(s for s, _ in entries), "log_history": dicts})
    rows = load_or_reason(text.encode())
    assert rows == expected_rows(entries)


@settings(max_examples=50)
@given(ENTRIES, st.sampled_from(["nan", "inf", "-inf"]))
def test_non_finite_strings_are_kept_as_numbers(entries: list, word: str) -> None:
    step, metrics = entries[-1]
    name = min(metrics)
    dicts = [{"step": s, **m} for s, m in entries[:-1]] + [{"step": step, **metrics, name: word}]
    rows = dict(load_or_reason("\n".join(json.dumps(d) for d in dicts).encode()))
    value = rows[step][name]
    assert math.isnan(value) if word == "nan" else value == float(word)
