"""The chunk codec and the bucket summaries computed from decoded points (issue 57), against
plain Python: any steps (sparse, 0, the largest 32-bit step), any float64 (NaN, inf, -inf,
-0.0, subnormals), re-sends merged over stored points, and a corrupt blob refused."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.metrics import bucket_stats, chunks

STEPS = st.integers(min_value=0, max_value=2**31 - 1)
VALUES = st.floats(allow_nan=True, allow_infinity=True, width=64)


def _points(d: dict[int, float]) -> chunks.Points:
    steps = sorted(d)
    return np.array(steps, np.int64), np.array([d[s] for s in steps], np.float64)


def _bits(values: np.ndarray) -> list[bytes]:
    return [struct.pack("<d", v) for v in values.tolist()]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(STEPS, VALUES, min_size=1, max_size=300))
def test_a_blob_decodes_to_the_very_steps_and_bits_it_was_given(d: dict[int, float]) -> None:
    steps, values = _points(d)
    back_steps, back_values = chunks.decode(chunks.encode(steps, values), steps.size)
    assert back_steps.tolist() == steps.tolist()
    assert _bits(back_values) == _bits(values)  # NaN, -0.0 and subnormals bit for bit


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(STEPS, VALUES, max_size=100), st.dictionaries(STEPS, VALUES, min_size=1,
                                                                      max_size=100))
def test_merging_is_a_dict_update_the_new_value_wins_once(old: dict[int, float],
                                                          new: dict[int, float]) -> None:
    steps, values = chunks.merge(_points(old) if old else (np.empty(0, np.int64),
                                                           np.empty(0, np.float64)),
                                 _points(new))
    expected = _points({**old, **new})
    assert steps.tolist() == expected[0].tolist()
    assert _bits(values) == _bits(expected[1])


def test_a_blob_of_another_format_or_length_is_refused() -> None:
    blob = chunks.encode(np.array([1, 2], np.int64), np.array([0.5, 0.25]))
    with pytest.raises(ValueError, match="format"):
        chunks.decode(b"\x09" + blob[1:], 2)
    with pytest.raises(ValueError, match="holds"):
        chunks.decode(blob, 3)


def test_a_dense_series_of_float32_figures_takes_a_few_bytes_a_point() -> None:
    """What a trainer logs (float32 means, steps 1, 2, 3...) compresses; noise does not."""
    steps = np.arange(1, chunks.CHUNK_STEPS + 1, dtype=np.int64)
    figures = np.random.RandomState(0).normal(size=steps.size).astype(np.float32)
    assert len(chunks.encode(steps, figures.astype(np.float64))) / steps.size < 5
    assert chunks.last_finite(np.array([1.0, 2.0, math.nan])) == 2.0
    assert chunks.last_finite(np.array([math.inf])) is None


def _model_row(points: list[tuple[int, float]]) -> tuple:
    finite = [v for _, v in points if math.isfinite(v)]
    bad = [(s, v) for s, v in points if not math.isfinite(v)]
    kinds = sorted({repr(v) for _, v in bad})  # SQL's max(raw): "nan" > "inf" > "-inf"
    return (len(finite), math.fsum(finite) if finite else None, min(finite, default=None),
            max(finite, default=None), points[0][0], points[-1][0], len(bad),
            min((s for s, _ in bad), default=None), kinds[-1] if kinds else None)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.integers(0, 5_000), st.one_of(
    st.floats(-1e6, 1e6), st.sampled_from([math.nan, math.inf, -math.inf])), min_size=1,
    max_size=400), st.sampled_from([16, 256, 32]))
def test_bucket_rows_are_what_sql_aggregates_of_the_points_were(d: dict[int, float],
                                                                width: int) -> None:
    rows = bucket_stats.rows("m", bucket_stats.stats(_points(d), width))
    buckets: dict[int, list[tuple[int, float]]] = {}
    for s in sorted(d):
        buckets.setdefault(s // width, []).append((s, d[s]))
    assert [r[1] for r in rows] == sorted(buckets)
    for row in rows:
        want = _model_row(buckets[row[1]])
        got = tuple(row[2:])
        assert got[0] == want[0] and got[2:] == want[2:]
        assert (got[1] is None) == (want[1] is None)
        if want[1] is not None:
            assert math.isclose(got[1], want[1], rel_tol=1e-9, abs_tol=1e-6)


def test_drawn_buckets_put_the_band_at_the_middle_and_a_nonfinite_at_its_step() -> None:
    points = _points({0: 1.0, 5: 3.0, 15: math.nan, 16: -math.inf, 40: 2.0})
    series = bucket_stats.drawn(bucket_stats.stats(points, 16))
    assert series.steps == [7.5, 15, 16, 40.0]
    assert series.counts == [2, 1, 1, 1]
    assert series.values[0] == 2.0 and (series.lows or [])[0] == 1.0
    assert math.isnan(series.values[1]) and series.values[2] == -math.inf
