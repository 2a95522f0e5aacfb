"""Property test: no series, however odd, makes any detector raise.

Every declared metric (and two reward components) gets an arbitrary series: hand-drawn values
with NaN/inf/huge/tiny numbers, or a long generated shape (constant, ramp, step, spiky, random
walk, alternating) up to thousands of rows. Rows are fed incrementally in random chunks, as a
live run sends them; a detector that raises shows up as an ``internal_error`` note, so the
property is "no note, ever", plus a direct call of every detector on the final state.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.diagnostics import DiagnosticsState, RunContext
from app.diagnostics.detectors import DETECTORS
from app.diagnostics.state import TRACKED
from app.diagnostics.view import View

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow is the point

METRICS = sorted(TRACKED) + ["rewards/format/mean", "rewards/accuracy/mean"]
ODD = st.sampled_from([0.0, -0.0, 1.0, -1.0, 1e-300, -1e-300, 1e300, -1e300, 1.7e308,
                       float("nan"), float("inf"), float("-inf")])
VALUE = st.one_of(ODD, st.floats(allow_nan=True, allow_infinity=True),
                  st.floats(-10, 10), st.integers(-5, 5).map(float))
SHAPES = ("constant", "ramp", "step", "spiky", "walk", "alternate", "zero", "peak")


def shaped(kind: str, n: int, scale: float, seed: int, nan_share: float) -> list[float]:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)
    v = {"constant": np.full(n, scale), "zero": np.zeros(n), "ramp": scale * t,
         "step": np.where(t < 0.5, scale, scale * 1e-3),
         "spiky": scale * (1 + (rng.random(n) < 0.05) * 1e3),
         "walk": scale * np.cumsum(rng.normal(size=n)),
         "alternate": scale * (np.arange(n) % 2),
         "peak": scale * np.sin(np.pi * t)}[kind]
    v = v.astype(float)
    v[rng.random(n) < nan_share] = np.nan
    return v.tolist()


SERIES = st.one_of(
    st.lists(VALUE, max_size=40),
    st.builds(shaped, st.sampled_from(SHAPES), st.integers(0, 3000),
              st.one_of(ODD.filter(np.isfinite), st.floats(-1e6, 1e6)),
              st.integers(0, 2**16), st.sampled_from([0.0, 0.0, 0.01, 0.5])),
)
CONTEXT = st.builds(
    RunContext, max_completion_length=st.one_of(st.none(), st.integers(-1, 4096)),
    is_live=st.booleans(), now=st.one_of(st.none(), st.floats(0, 1e10)),
    last_report_at=st.one_of(st.none(), st.floats(0, 1e10)),
    seconds_per_step=st.one_of(st.none(), st.floats(0, 1e4), st.just(float("nan"))))


@st.composite
def runs(draw) -> tuple[list[tuple[int, dict]], RunContext, list[int]]:
    chosen = draw(st.lists(st.sampled_from(METRICS), unique=True, max_size=len(METRICS)))
    cols = {m: draw(SERIES) for m in chosen}
    n = max((len(c) for c in cols.values()), default=0)
    every = draw(st.integers(1, 10))
    rows = [(every * (i + 1), {m: c[i] for m, c in cols.items() if i < len(c)})
            for i in range(n)]
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    return rows, draw(CONTEXT), cuts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(runs())
def test_no_detector_raises_on_any_series(run) -> None:
    rows, ctx, cuts = run
    state = DiagnosticsState.new(ctx)
    for lo, hi in zip([0, *cuts], [*cuts, len(rows)], strict=True):
        diagnosis = state.update(rows[lo:hi])
        notes = [f.evidence for f in diagnosis.findings if f.category == "internal_error"]
        assert notes == []
    view = View(state.metrics, state.context)
    for det in DETECTORS:  # and directly, without the isolation in between
        det(view.scoped(det))
    DiagnosticsState.from_json(state.to_json())
