"""Pure metric helpers under hypothesis: metric-name normalisation (app/metrics/names.py) and
chart downsampling (app/metrics/series.py), each against properties written down here."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.metrics import names
from app.metrics.names import canonical_name, normalize_row, to_float
from app.metrics.series import Series, downsample

# Old TRL spelling -> newest, written down here (not read from names._RENAMES).
RENAMED = {
    "completion_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio",
    "mean_length": "completions/mean_length", "min_length": "completions/min_length",
    "max_length": "completions/max_length",
    "mean_terminated_length": "completions/mean_terminated_length",
    "min_terminated_length": "completions/min_terminated_length",
    "max_terminated_length": "completions/max_terminated_length",
}
SEGMENT = st.text(st.characters(categories=("L", "N"), include_characters="_-."), min_size=1,
                  max_size=10)
NAME = st.one_of(st.sampled_from(sorted(RENAMED) + sorted(set(RENAMED.values())) + [
    "reward", "loss", "kl", "rewards/acc", "rewards/acc/mean", "rewards/acc/std"]),
    st.builds(lambda a: f"rewards/{a}", SEGMENT),
    st.builds(lambda a, b: f"{a}/{b}", SEGMENT, SEGMENT), SEGMENT)
PREFIX = st.sampled_from(["", "eval_"])
SPACE = st.sampled_from(["", " ", "\t"])


# -- names ---------------------------------------------------------------------------------

def expected_name(name: str) -> str:
    """The newest spelling, derived from the rules above and TRL's rewards/<f>/mean rename."""
    if name in RENAMED:
        return RENAMED[name]
    parts = name.split("/")
    if len(parts) == 2 and parts[0] == "rewards" and parts[1]:
        return f"{name}/mean"
    return name


@given(PREFIX, NAME, SPACE, SPACE)
def test_canonical_name_follows_the_renames_and_keeps_eval(prefix: str, name: str, lead: str,
                                                           trail: str) -> None:
    if name.startswith("eval_"):
        return
    got = canonical_name(f"{lead}{prefix}{name}{trail}")
    assert got == prefix + expected_name(name)
    assert canonical_name(got) == got  # idempotent: the newest name is already canonical


NUMBER = st.one_of(st.floats(), st.integers(-10**9, 10**9))


@given(st.dictionaries(st.one_of(NAME, st.builds(lambda n: "eval_" + n, NAME)),
                       st.one_of(NUMBER, st.none(), st.booleans(), st.text(max_size=4),
                                 NUMBER.map(repr)), max_size=8))
def test_normalize_row_keeps_numbers_under_canonical_names(row: dict) -> None:
    out = normalize_row(row)
    assert all(type(v) is float for v in out.values())
    assert set(out) == {canonical_name(k) for k, v in row.items() if to_float(v) is not None}
    for key, value in row.items():  # a name nobody else maps to keeps its own value
        number = to_float(value)
        twins = [k for k in row if canonical_name(k) == canonical_name(key)]
        if number is not None and twins == [key]:
            got = out[canonical_name(key)]
            assert got == number or (math.isnan(got) and math.isnan(number))


@given(st.sampled_from(sorted(RENAMED)), PREFIX, NUMBER.filter(lambda v: not math.isnan(v)),
       NUMBER.filter(lambda v: not math.isnan(v)), st.booleans())
def test_the_new_spelling_wins_whatever_the_order(old: str, prefix: str, old_value: float,
                                                  new_value: float, new_first: bool) -> None:
    new = RENAMED[old]
    pairs = [(prefix + old, old_value), (prefix + new, new_value)]
    row = dict(reversed(pairs) if new_first else pairs)
    assert normalize_row(row) == {prefix + new: float(new_value)}


@given(st.floats())
def test_numbers_and_their_strings_read_the_same(value: float) -> None:
    for form in (value, repr(value), f" {value} ", np.float64(value) if math.isfinite(value)
                 else value):
        got = to_float(form)
        assert got is not None
        assert (math.isnan(got) and math.isnan(value)) or got == float(form)
    assert to_float(True) is None and to_float(None) is None and to_float("x1") is None


# -- downsampling --------------------------------------------------------------------------

@st.composite
def series(draw: st.DrawFn) -> Series:
    n = draw(st.integers(1, 150))
    gaps = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    steps = np.cumsum(gaps).tolist()
    finite = st.floats(-1e6, 1e6, allow_nan=False)
    values = draw(st.lists(st.one_of(finite, finite, finite, st.sampled_from(
        [math.nan, math.inf, -math.inf])), min_size=n, max_size=n))
    return Series(steps=steps, values=values)


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=150, deadline=None)
@given(series(), st.integers(3, 60))
def test_downsampling_keeps_first_last_extremes_and_every_non_finite(s: Series,
                                                                     max_points: int) -> None:
    out = downsample(s, max_points)
    if len(s.steps) <= max_points:
        assert out.steps == s.steps
        return
    original = dict(zip(s.steps, s.values, strict=True))
    assert out.steps == sorted(set(out.steps)) and set(out.steps) <= set(original)
    assert all(same(original[st_], v) for st_, v in zip(out.steps, out.values, strict=True))
    assert out.steps[0] == s.steps[0] and out.steps[-1] == s.steps[-1]
    finite = [v for v in s.values if math.isfinite(v)]
    kept = [v for v in out.values if math.isfinite(v)]
    if finite:
        assert max(kept) == max(finite) and min(kept) == min(finite)
    non_finite = [st_ for st_, v in original.items() if not math.isfinite(v)]
    assert set(non_finite) <= set(out.steps)  # a NaN is never smoothed away
    assert len(kept) <= max(max_points, 5)  # LTTB needs 3 points, plus the two extremes


@given(st.dictionaries(st.one_of(st.sampled_from(["reward", " reward", "reward ", "kl", "kl "]),
                                 st.sampled_from(sorted(RENAMED)),
                                 st.sampled_from(sorted(set(RENAMED.values()))), NAME),
                       st.floats(), max_size=8))
def test_a_row_read_again_by_its_key_plan_is_read_as_the_first_time(row: dict) -> None:
    """The second row with the same keys takes the cached plan (issue 57): the same names and
    values as key-by-key reading, old spellings and keys to one name included."""
    first = normalize_row(dict(row))
    again = normalize_row(dict(row))
    assert repr(again) == repr(first) == repr(names._normalized(dict(row)))
