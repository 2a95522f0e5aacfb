"""The metric store against a plain in-memory model (issue 57), under hypothesis: a random stream
of report batches goes to a run through the report API, and every reader answers what a dict of
(metric, step) -> value, the last value written winning, says.

The stream re-sends steps (a new value for a step still waiting in the inbox, and for one
already settled), sends NaN, inf and -inf, steps out of order, huge steps (up to 2**31-1, the
column's last) and steps far apart (a run past 70,000 steps: charts drawn from summaries),
several metrics per step and steps that log only some of them, and settles (what the
background settler does within a second, ``tests.settled.settle``) after some batches and not
others. Only HTTP answers and public functions are read, never the tables: the same test holds
for any store behind the readers.

The readers and what each must answer:

* ``GET /api/runs/{id}/metrics``: whole, with ``names=`` and with ``after=``, exactly the model
  (NaN/inf as their text, "nan", "inf", "-inf"); with ``max_points=`` a subset of the model's
  points that keeps every NaN/inf, the first and last finite points and the finite extremes.
* ``GET /api/runs/{id}/chart``, whole and zoomed to a random step range: ``last_step`` is the
  run's last step; at level 0 the model's points of the range; at a summary level (above 0)
  one point per bucket of ``width`` steps that holds finite values, with their exact count,
  min, max and mean, and a marker at the bucket's first NaN/inf (``app.metrics.rollups``: a
  bucket keeps its non-finite values' count, first step and one of their kinds; the marker's
  ``n`` is 1 whatever their number). Exact once settled. While steps wait in the inbox
  (``waiting.rows`` says which: ingest also settles by itself once a run's unsettled steps
  span ``SETTLE_EVERY_STEPS``), a summary of a metric's whole range is what
  ``waiting.merge_buckets`` promises: the settled buckets, with the waiting steps past the
  metric's last settled step folded in (finite ones into the bucket's count, min, max and
  mean, each NaN/inf a marker of its own); a re-sent or out-of-order step inside the settled
  range shows once settled. A zoomed summary while steps wait is only held to counting each
  step at most once, within the values ever sent to its bucket.
* the compare page draws each metric as the chart does (its line, band and NaN/inf markers).
* the export, JSON Lines and CSV: one row per step, exactly the model.
* the run's live diagnosis is ``app.diagnostics.diagnose`` of the model's rows, and
  ``GET /findings`` lists each of its findings (one the rows no longer show may stay listed a
  few batches: the page's stabilisation, ``app.health.stability``).

Three streams are always run (``@example``): every case above at once, a live run's summaries
with steps waiting, and a re-sent step inside the last settled bucket (see its comment). A
failing stream is printed as Python (``stream = ...``; NaN/inf as ``nan``/``inf``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pprint import pformat
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

from app.core.db import get_sessionmaker
from app.diagnostics import Diagnosis, diagnose
from app.health import state_cache
from app.health.service import context_for
from app.metrics import waiting
from app.runs.models import Run
from tests.app.conftest import html, running_run
from tests.app.test_resent_steps import post, settle_now

NAMES = ("reward", "loss", "kl", "entropy")
NAN, INF = math.nan, math.inf
LAST_STEP = 2**31 - 1  # metric steps are a 32-bit column
COMPARE_POINTS = 2_000  # the compare page's budget (settings.chart_max_points, default)
EXAMPLES = int(os.environ.get("GRPODECK_STORE_EXAMPLES", "25"))

Metrics = dict[str, float]
Row = tuple[int, Metrics]


# ---------------------------------------------------------------- the stream


@dataclass(frozen=True)
class Probe:
    """One reading of every reader, with these parameters."""

    after: int  # /metrics?after=
    x0: int  # /chart zoomed to x0..x1
    x1: int
    chart_points: int  # /chart max_points (8 or more)
    metric_points: int  # /metrics max_points (3 or more)
    names: tuple[str, ...]  # a names= selection


@dataclass(frozen=True)
class Batch:
    rows: tuple[Row, ...]
    settle: bool = False  # settled right after it
    probe: Probe | None = None  # every reader read after it (and after its settle)


@dataclass(frozen=True)
class Stream:
    batches: tuple[Batch, ...]
    final: Probe  # read at the end, then settled and read again


SPECIAL = st.sampled_from([NAN, INF, -INF])
FINITE = st.one_of(st.integers(-3, 3).map(float),
                   st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))
VALUE = st.one_of(FINITE, FINITE, FINITE, SPECIAL)


# Where a range of steps (a summary's bucket, a stored chunk, an export's) may begin or end.
EDGES = sorted({k * 2**j + d for j in (4, 8, 10, 12, 16) for k in (1, 2, 3) for d in (-1, 0)})


def far_steps() -> st.SearchStrategy[int]:
    """Steps apart from the run's dense ones: near, at powers of two, past 70,000 (summary
    levels 2-4) and at the end of the column."""
    return st.one_of(st.integers(0, 3_000), st.sampled_from(EDGES), st.integers(70_000, 300_000),
                     st.integers(LAST_STEP - 5_000, LAST_STEP), st.just(LAST_STEP))


@st.composite
def probes(draw: st.DrawFn, pool: list[int], names: list[str]) -> Probe:
    near = st.one_of(st.sampled_from(pool), st.sampled_from(pool).map(lambda s: s - 1),
                     st.sampled_from(pool).map(lambda s: s + 1), st.integers(0, LAST_STEP))
    x0, x1 = sorted(min(max(draw(near), 0), LAST_STEP) for _ in range(2))
    return Probe(after=min(max(draw(near), -1), LAST_STEP - 1), x0=x0, x1=x1,
                 chart_points=draw(st.sampled_from([8, 16, 32, 2_000])),
                 metric_points=draw(st.sampled_from([3, 5, 10, 1_000])),
                 names=tuple(draw(st.lists(st.sampled_from(names), min_size=1, unique=True))))


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    start = draw(st.integers(0, 40))
    dense = list(range(start, start + draw(st.integers(3, 40))))
    far = draw(st.lists(far_steps(), min_size=1, max_size=4)) if draw(st.booleans()) else []
    pool = sorted({*dense, *far})

    def metrics() -> Metrics:  # all of the run's metrics, or only some
        logged = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        return {name: draw(VALUE) for name in sorted(logged, key=names.index)}

    batches: list[Batch] = []
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.integers(0, 5)) if batches else 5
        if kind == 0:  # the last step sent re-sent (a retry), maybe with the next ones
            last = max(step for b in batches for step, _ in b.rows)
            steps = [last, *draw(st.lists(st.sampled_from(pool), max_size=2))]
        elif kind == 1:  # the previous batch re-sent whole
            steps = [step for step, _ in batches[-1].rows]
        else:  # a trainer's next steps in order, plus steps from anywhere (re-sent, late, far)
            at = draw(st.integers(0, len(pool) - 1))
            steps = pool[at:at + draw(st.integers(0, 12))]
            steps += draw(st.lists(st.sampled_from(pool), max_size=4))
            if not steps:
                steps = [draw(st.sampled_from(pool))]
            if draw(st.booleans()):
                steps = draw(st.permutations(steps))
        rows = tuple((step, metrics()) for step in steps)
        probe = draw(probes(pool, names)) if draw(st.integers(0, 2)) == 0 else None
        batches.append(Batch(rows, settle=draw(st.booleans()), probe=probe))
    return Stream(tuple(batches), draw(probes(pool, names)))


# Every case the issue names, in one stream, whatever hypothesis draws.
EVERYTHING = Stream(batches=(
    Batch(tuple((s, {"reward": 0.1 * s, "loss": 1.0, "kl": 0.01 * s}) for s in range(1, 21)),
          settle=True),
    Batch(((5, {"reward": NAN}), (20, {"reward": 9.0, "loss": INF}),  # settled, re-sent
           (23, {"reward": 2.3}), (21, {"reward": 2.1, "kl": -INF}), (22, {"loss": 0.5}))),
    Batch(((23, {"reward": -INF}), (21, {"kl": 0.3}), (24, {"reward": 2.4})),  # waiting, re-sent
          probe=Probe(after=10, x0=4, x1=22, chart_points=8, metric_points=5,
                      names=("reward", "kl"))),
    Batch(((80_000, {"reward": 1.0, "loss": 0.2}), (LAST_STEP, {"reward": 7.0, "kl": NAN}),
           (3, {"reward": 3.5})), settle=True),
    Batch(((LAST_STEP, {"reward": 8.0}), (80_000, {"loss": NAN}), (79_999, {"loss": 0.1}))),
), final=Probe(after=20, x0=0, x1=100_000, chart_points=16, metric_points=3,
               names=("loss",)))


# A live run's summaries: steps 0..20 settled, 21..40 waiting (a NaN among them, and a settled
# step re-sent, shown once settled); the last step re-sent alone, with a NaN (a state that took
# it as "already seen" kept the NaN out of the live diagnosis).
LIVE = Stream(batches=(
    Batch(tuple((s, {"reward": 0.5 * s, "loss": 1.0}) for s in range(21)), settle=True),
    Batch(tuple((s, {"reward": NAN if s == 30 else 0.5 * s}) for s in range(21, 41))
          + ((3, {"reward": 99.0}),),
          probe=Probe(after=25, x0=10, x1=35, chart_points=8, metric_points=3,
                      names=("reward",))),
    Batch(((40, {"reward": NAN, "loss": 2.0}),)),
), final=Probe(after=39, x0=30, x1=40, chart_points=16, metric_points=5, names=("loss",)))


# A re-sent settled step in the later half of a metric's last settled bucket, read from a
# summary while it waits: ``waiting.merge_buckets`` folds a waiting step into the last bucket
# when it is past the bucket's drawn (middle) step, not past its last settled step, so step 31
# is counted twice (bucket 16..31: n 17 for 16 steps, max 5.0 beside its old 1.0).
RE_SENT_IN_THE_LAST_BUCKET = Stream(batches=(
    Batch(tuple((s, {"reward": 1.0}) for s in range(32)), settle=True),
    Batch(((31, {"reward": 5.0}),)),
), final=Probe(after=0, x0=0, x1=31, chart_points=8, metric_points=3, names=("reward",)))


# ---------------------------------------------------------------- the model


@dataclass
class Model:
    """(metric, step) -> its last value; the values as of the last settle and those written
    since (waiting in the inbox); and every value ever sent to a step."""

    points: dict[str, dict[int, float]] = field(default_factory=dict)
    settled: dict[str, dict[int, float]] = field(default_factory=dict)
    waiting: dict[str, dict[int, float]] = field(default_factory=dict)
    sent: dict[str, dict[int, list[float]]] = field(default_factory=dict)

    def write(self, rows: Iterable[Row]) -> None:
        for step, metrics in rows:
            for name, value in metrics.items():
                self.points.setdefault(name, {})[step] = value
                self.waiting.setdefault(name, {})[step] = value
                self.sent.setdefault(name, {}).setdefault(step, []).append(value)

    def settle(self) -> None:
        self.settled = {name: dict(points) for name, points in self.points.items()}
        self.waiting = {}

    def series(self, names: Iterable[str] | None = None, lo: int = 0, hi: int = LAST_STEP
               ) -> dict[str, list[tuple[int, float]]]:
        out = {}
        for name in sorted(self.points if names is None else set(names) & set(self.points)):
            got = [(s, v) for s, v in sorted(self.points[name].items()) if lo <= s <= hi]
            if got:
                out[name] = got
        return out

    def steps(self) -> list[int]:
        return sorted({s for points in self.points.values() for s in points})

    def rows(self) -> list[Row]:
        """One row per step, in step order, as ``diagnose`` and the export take them."""
        by_step: dict[int, Metrics] = {}
        for name in sorted(self.points):
            for step, value in self.points[name].items():
                by_step.setdefault(step, {})[name] = value
        return sorted(by_step.items())


# ---------------------------------------------------------------- reading the answers


def number(value: Any) -> float:
    """A value as a reader wrote it: NaN/inf as their text."""
    assert value is not None and value != "", f"a missing value: {value!r}"
    return float(value)


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def as_written(value: float) -> float | str:
    """How the JSON readers write a value: NaN/inf as "nan", "inf", "-inf"."""
    return value if math.isfinite(value) else repr(value)


def written_same(got: Any, want: float) -> bool:
    text = as_written(want)
    return got == text if isinstance(text, str) else (
        isinstance(got, (int, float)) and not isinstance(got, bool) and got == want)


def get(client: TestClient, url: str, **params: Any) -> Any:
    reply = client.get(url, params=params)
    assert reply.status_code == 200, f"{url} {params}: {reply.status_code} {reply.text[:500]}"
    return reply


def raw_series(answer: dict[str, Any]) -> dict[str, list[tuple[int, Any]]]:
    """{name: [(step, value as written)]}, without empty series (a name with no point in the
    range is the same as no name)."""
    out = {}
    for name, s in answer.items():
        assert len(s["steps"]) == len(s["values"]), name
        if s["steps"]:
            out[name] = list(zip(s["steps"], s["values"], strict=True))
    return dict(sorted(out.items()))


def assert_exact(label: str, got: dict[str, list[tuple[int, Any]]],
                 want: dict[str, list[tuple[int, float]]]) -> None:
    assert sorted(got) == sorted(want), f"{label}: names {sorted(got)} != {sorted(want)}"
    for name, points in want.items():
        steps = [s for s, _ in got[name]]
        assert steps == [s for s, _ in points], (
            f"{label}: {name} steps\n  read  {steps}\n  model {[s for s, _ in points]}")
        wrong = [(s, g, v) for (s, g), (_, v) in zip(got[name], points, strict=True)
                 if not written_same(g, v)]
        assert not wrong, f"{label}: {name} (step, read, model): {wrong}"


def assert_downsampled(label: str, got: dict[str, list[tuple[int, Any]]],
                       want: dict[str, list[tuple[int, float]]], max_points: int) -> None:
    """A subset of the model's points keeping every NaN/inf, the first and last finite points
    and the finite extremes, with at most ``max(max_points, 5)`` finite ones."""
    assert sorted(got) == sorted(want), f"{label}: names {sorted(got)} != {sorted(want)}"
    for name, points in want.items():
        if len(points) <= max_points:
            assert_exact(label, {name: got[name]}, {name: points})
            continue
        model = dict(points)
        steps = [s for s, _ in got[name]]
        assert steps == sorted(set(steps)), f"{label}: {name} steps repeat or go back: {steps}"
        wrong = [(s, g) for s, g in got[name] if s not in model or not written_same(g, model[s])]
        assert not wrong, f"{label}: {name} points not the model's: {wrong}"
        kept = set(steps)
        bad = [s for s, v in points if not math.isfinite(v)]
        assert set(bad) <= kept, f"{label}: {name} NaN/inf at {sorted(set(bad) - kept)} lost"
        finite = [(s, v) for s, v in points if math.isfinite(v)]
        if finite:
            must = {finite[0][0], finite[-1][0], min(finite, key=lambda p: p[1])[0],
                    max(finite, key=lambda p: p[1])[0]}
            values = {v for s, v in got[name] if s in must}
            assert {model[s] for s in must} <= values, (
                f"{label}: {name} lost the first, last, min or max finite point {must - kept}")
            shown = sum(1 for s in steps if math.isfinite(model[s]))
            assert shown <= max(max_points, 5), f"{label}: {name} {shown} finite points"


# -- summaries


@dataclass
class Bucket:
    finite: list[tuple[float, float, float, float, int]] = field(default_factory=list)
    bad: list[tuple[float, float]] = field(default_factory=list)  # (step, value)


def buckets_read(label: str, s: dict[str, Any], width: int) -> dict[int, Bucket]:
    for key in ("min", "max", "n"):
        assert len(s[key]) == len(s["steps"]), f"{label}: {key} has {len(s[key])} entries"
    out: dict[int, Bucket] = {}
    for step, mean, low, high, n in zip(s["steps"], s["values"], s["min"], s["max"], s["n"],
                                        strict=True):
        mean, low, high = number(mean), number(low), number(high)
        bucket = out.setdefault(int(step) // width, Bucket())
        if math.isfinite(mean):
            bucket.finite.append((step, mean, low, high, n))
        else:
            assert n == 1 and same(low, mean) and same(high, mean), (
                f"{label}: a NaN/inf marker at {step} reads {mean, low, high, n}")
            bucket.bad.append((step, mean))
    return out


def close(a: float, b: float, scale: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9 * scale + 1e-300)


def check_bucket(label: str, got: Bucket, inner: list[tuple[int, float]],
                 outer: list[tuple[int, float]]) -> None:
    """A settled bucket's summary against the model's points in it: ``inner`` must be in it
    and at most ``outer`` (the same where the read range holds the whole bucket; at a zoomed
    chart's edge the summary holds whole stored buckets of the range's ends)."""
    f_in = [v for _, v in inner if math.isfinite(v)]
    f_out = [v for _, v in outer if math.isfinite(v)]
    assert len(got.finite) <= 1, f"{label}: {len(got.finite)} finite points {got.finite}"
    if got.finite:
        step, mean, low, high, n = got.finite[0]
        assert f_out, f"{label}: a finite point {got.finite}; the model has none: {outer}"
        assert len(f_in) <= n <= len(f_out), (
            f"{label}: counts {n} steps, the model {len(f_in)}"
            + (f"..{len(f_out)}" if len(f_out) != len(f_in) else ""))
        assert min(f_out) <= low <= min(f_in or [math.inf]), f"{label}: min {low}, model {f_in}"
        assert max(f_in or [-math.inf]) <= high <= max(f_out), (
            f"{label}: max {high}, model {f_in}")
        scale = max(abs(v) for v in f_out)
        if inner == outer:
            assert close(mean, sum(f_in) / len(f_in), scale), (
                f"{label}: mean {mean}, model {sum(f_in) / len(f_in)} of {f_in}")
            assert outer[0][0] <= step <= outer[-1][0], f"{label}: drawn at {step}"
        else:
            assert low - 1e-9 * scale <= mean <= high + 1e-9 * scale, f"{label}: mean {mean}"
    else:
        assert not f_in, f"{label}: no finite point; the model has {len(f_in)}: {f_in}"
    b_in = [(s, v) for s, v in inner if not math.isfinite(v)]
    b_out = [(s, v) for s, v in outer if not math.isfinite(v)]
    assert len(got.bad) <= 1, f"{label}: {len(got.bad)} NaN/inf markers {got.bad}"
    if got.bad:
        step, value = got.bad[0]
        first = min(b_in)[0] if b_in else math.inf
        kinds = [v for _, v in b_out]
        assert step in {s for s, _ in b_out} and step <= first, (
            f"{label}: NaN/inf marker at {step}, the model's first at {first} ({b_out})")
        assert any(same(value, v) for v in kinds), f"{label}: marker {value}, model {kinds}"
    else:
        assert not b_in, f"{label}: no NaN/inf marker; the model has {b_in}"


def check_summary_waiting(label: str, got: Bucket, sent: dict[int, list[float]]) -> None:
    """While steps wait: each step counted at most once, within the values ever sent to it."""
    finite = {s: [v for v in vs if math.isfinite(v)] for s, vs in sent.items()}
    finite = {s: vs for s, vs in finite.items() if vs}
    assert len(got.finite) <= 1, f"{label}: {len(got.finite)} finite points {got.finite}"
    for step, mean, low, high, n in got.finite:
        assert 1 <= n <= len(finite), (
            f"{label}: counts {n} steps; {len(finite)} ever had a finite value: {finite}")
        ever = [v for vs in finite.values() for v in vs]
        assert min(ever) <= low <= high <= max(ever), (
            f"{label}: min {low} max {high}, values sent {ever}")
        scale = max(abs(v) for v in ever)
        assert low - 1e-9 * scale <= mean <= high + 1e-9 * scale, f"{label}: mean {mean}"
    bad = {s: [v for v in vs if not math.isfinite(v)] for s, vs in sent.items()}
    bad = {s: vs for s, vs in bad.items() if vs}
    for step, value in got.bad:  # at a NaN/inf's step, one of the bucket's kinds
        assert step in bad and any(same(value, v) for vs in bad.values() for v in vs), (
            f"{label}: a {value} marker at {step}; NaN/inf sent: {bad}")


def check_summary_folded(label: str, got: Bucket, settled: list[tuple[int, float]],
                         folded: list[tuple[int, float]]) -> None:
    """A bucket of a whole run's summary: its settled points, and the waiting steps past the
    metric's last settled step folded in (``waiting.merge_buckets``): the finite ones into the
    bucket's count, min, max and mean, each NaN/inf as a marker of its own."""
    finite = [v for _, v in [*settled, *folded] if math.isfinite(v)]
    assert len(got.finite) == (1 if finite else 0), (
        f"{label}: finite points {got.finite}; the model's values {finite}")
    if finite:
        step, mean, low, high, n = got.finite[0]
        assert n == len(finite), f"{label}: counts {n} steps, the model {len(finite)}: {finite}"
        assert (low, high) == (min(finite), max(finite)), (
            f"{label}: min {low} max {high}, the model's {min(finite)} {max(finite)}")
        assert close(mean, sum(finite) / n, max(abs(v) for v in finite)), (
            f"{label}: mean {mean}, the model's {sum(finite) / n} of {finite}")
    markers = sorted(got.bad)
    for step, value in [(s, v) for s, v in folded if not math.isfinite(v)]:
        found = [m for m in markers if m[0] == step and same(m[1], value)]
        assert found, f"{label}: no {value} marker at waiting step {step}: {markers}"
        markers.remove(found[0])
    bad = [(s, v) for s, v in settled if not math.isfinite(v)]
    if bad:  # the settled NaN/inf: at the first, one of their kinds
        assert len(markers) == 1 and markers[0][0] == bad[0][0] and any(
            same(markers[0][1], v) for _, v in bad), (
            f"{label}: markers {markers}, for the settled NaN/inf {bad}")
    else:
        assert not markers, f"{label}: markers {markers}; the model has no NaN/inf there"


def check_chart(label: str, answer: dict[str, Any], model: Model, names: list[str] | None,
                x0: int, x1: int, settled: bool) -> None:
    want = model.series(names, x0, x1)
    got = {n: s for n, s in answer["series"].items() if s["steps"]}
    level, width = answer["level"], answer["width"]
    event(f"chart level {level}, {'settled' if settled else 'steps waiting'}")
    if level == 0:
        for name, s in got.items():
            assert "n" not in s, f"{label}: raw points (level 0) with summaries: {name}"
        assert_exact(label, raw_series(got), want)
        return
    # a summary holds whole buckets: one at an end of a zoomed range may hold only points
    # outside it, of a metric with none inside
    chosen = set(model.points if names is None else names) & set(model.points)
    assert set(want) <= set(got) <= chosen, (
        f"{label}: names {sorted(got)}, the range's {sorted(want)}")
    for name, s in got.items():
        where = f"{label}, level {level} width {width}, {name}"
        read = buckets_read(where, s, width)
        model_points = model.series([name])[name]
        keys = {s_ // width for s_, _ in want.get(name, [])}
        assert set(read) <= {s_ // width for s_, _ in model_points} and (
            all(b * width <= x1 and (b + 1) * width - 1 >= x0 for b in read)), (
            f"{where}: buckets {sorted(set(read) - keys)} hold none of the range's points")
        whole = x0 <= model_points[0][0] and model_points[-1][0] <= x1
        stored = sorted(model.settled.get(name, {}).items())
        last = stored[-1][0] if stored else -1
        folded = [(s_, v) for s_, v in sorted(model.waiting.get(name, {}).items()) if s_ > last]
        for b in sorted(keys | set(read) | {s_ // width for s_, _ in folded}):
            got_b = read.get(b, Bucket())
            outer = [(s_, v) for s_, v in model_points if s_ // width == b]
            inner = [(s_, v) for s_, v in outer if x0 <= s_ <= x1]
            at = f"{where}, bucket {b} (steps {b * width}..{(b + 1) * width - 1})"
            if whole:  # what is settled, and what waits past it
                check_summary_folded(at, got_b, [p for p in stored if p[0] // width == b],
                                     [p for p in folded if p[0] // width == b])
            elif settled:
                check_bucket(at, got_b, inner, outer)
            else:
                check_summary_waiting(at, got_b, {s_: vs for s_, vs in model.sent[name].items()
                                                  if s_ // width == b})


# -- the compare page and the export


def compare_lines(client: TestClient, run_id: int, other: int, names: list[str]
                  ) -> dict[str, dict[str, Any]]:
    """Per metric, the run's line on the compare page: x, y (a gap: its NaN/inf marker's
    kind) and, for a summary, the band's [min, max, steps] per point."""
    page = get(client, "/runs/compare", ids=f"{run_id},{other}", metrics=",".join(names))
    out = {}
    for chart in html(page.text).select("#compare-charts .chart"):
        traces = json.loads(chart["data-figure"])["data"]
        lines = [t for t in traces if t.get("uid") == f"run-{run_id}"]
        if not lines:
            continue
        (line,) = lines
        marks = {x: kind for t in traces if t.get("uid") == "nonfinite"
                 for x, kind, said in zip(t["x"], t["text"], t["hovertext"], strict=True)
                 if said.startswith(f"#{run_id} ")}
        ys = []
        for x, y in zip(line["x"], line["y"], strict=True):
            assert y is not None or x in marks, (
                f"compare page: {chart['data-metric']} has a gap at {x} without a marker")
            ys.append(float(marks[x]) if y is None else y)
        out[chart["data-metric"]] = {"x": line["x"], "y": ys, "band": line.get("customdata")}
    return out


def check_compare(client: TestClient, run_id: int, other: int, model: Model) -> None:
    names = sorted(model.points)
    drawn = compare_lines(client, run_id, other, names)
    chart = get(client, f"/api/runs/{run_id}/chart", max_points=COMPARE_POINTS).json()
    assert sorted(drawn) == sorted(chart["series"]), (
        f"compare page draws {sorted(drawn)}, the chart {sorted(chart['series'])}")
    for name, s in chart["series"].items():
        line = drawn[name]
        assert line["x"] == s["steps"], f"compare page: {name} x {line['x']} != {s['steps']}"
        values = [number(v) for v in s["values"]]
        wrong = [(x, y, v) for x, y, v in zip(line["x"], line["y"], values, strict=True)
                 if not same(y, v)]
        assert not wrong, f"compare page: {name} (x, drawn, chart): {wrong}"
        if "n" in s:
            band = [[number(lo) if math.isfinite(number(lo)) else None,
                     number(hi) if math.isfinite(number(hi)) else None, n]
                    for lo, hi, n in zip(s["min"], s["max"], s["n"], strict=True)]
            assert line["band"] == band, f"compare page: {name} band {line['band']} != {band}"
        else:
            assert line["band"] is None, f"compare page: {name} has a band over raw points"


def check_export(client: TestClient, run_id: int, model: Model) -> None:
    rows = model.rows()
    reply = get(client, f"/api/runs/{run_id}/export", format="jsonl")
    lines = [json.loads(line) for line in reply.text.splitlines()]
    assert [r["step"] for r in lines] == [s for s, _ in rows], "export jsonl: its steps"
    for line, (step, metrics) in zip(lines, rows, strict=True):
        got = {k: v for k, v in line.items() if k != "step"}
        assert sorted(got) == sorted(metrics) and all(
            written_same(got[k], v) for k, v in metrics.items()), (
            f"export jsonl: step {step} reads {got}, the model {metrics}")
    reply = get(client, f"/api/runs/{run_id}/export", format="csv")
    header, *table = list(csv.reader(io.StringIO(reply.text)))
    assert header == ["step", *sorted(model.points)], f"export csv: header {header}"
    assert [int(r[0]) for r in table] == [s for s, _ in rows], "export csv: its steps"
    for line, (step, metrics) in zip(table, rows, strict=True):
        got = {k: v for k, v in zip(header[1:], line[1:], strict=True) if v != ""}
        assert sorted(got) == sorted(metrics) and all(
            same(float(got[k]), v) and (math.isfinite(v) or got[k] == repr(v))
            for k, v in metrics.items()), (
            f"export csv: step {step} reads {got}, the model {metrics}")


def check_findings(client: TestClient, run_id: int, model: Model) -> None:
    """The run's live diagnosis is ``diagnose`` of the model's rows, and ``GET /findings``
    lists each of its findings. (A finding the rows no longer show may stay listed a few
    batches more: the page's stabilisation, ``app.health.stability``, resolves it later.)"""
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        expected = diagnose(model.rows(), context_for(run))
        live = state_cache.current_diagnosis(db, run)
    assert live is not None, "no live diagnosis"

    def said(d: Diagnosis) -> tuple[Any, ...]:
        return (d.verdict, sorted((f.category, f.metric or "", f.severity, f.first_step,
                                   f.last_step) for f in d.findings),
                d.metrics, d.unchecked, d.reason)

    assert said(live) == said(expected), (
        f"the live diagnosis\n  {said(live)}\nis not a diagnosis of the model's rows\n"
        f"  {said(expected)}")
    body = get(client, f"/api/runs/{run_id}/findings").json()
    listed = {(f["category"], f["metric"], f["first_step"], f["last_step"])
              for f in body["findings"]}
    want = {(f.category, f.metric or "", f.first_step, f.last_step) for f in expected.findings}
    assert want <= listed, f"/findings lists {sorted(listed)}, not all of {sorted(want)}"
    assert body["metrics"] == expected.metrics, "findings: the metrics the checks read"


# ---------------------------------------------------------------- every reader


def check_readers(client: TestClient, run_id: int, other: int, model: Model,
                  probe: Probe) -> None:
    settled = not any(model.waiting.values())
    state = "settled" if settled else "steps waiting"
    url = f"/api/runs/{run_id}"
    names = [n for n in probe.names if n in model.points] or sorted(model.points)[:1]

    assert_exact(f"metrics ({state})", raw_series(get(client, f"{url}/metrics").json()),
                 model.series())
    assert_exact(f"metrics?names={','.join(names)} ({state})",
                 raw_series(get(client, f"{url}/metrics", names=",".join(names)).json()),
                 model.series(names))
    assert_exact(f"metrics?after={probe.after} ({state})",
                 raw_series(get(client, f"{url}/metrics", after=probe.after).json()),
                 model.series(lo=probe.after + 1))
    assert_downsampled(
        f"metrics?max_points={probe.metric_points} ({state})",
        raw_series(get(client, f"{url}/metrics", max_points=probe.metric_points).json()),
        model.series(), probe.metric_points)

    steps = model.steps()
    for points in sorted({probe.chart_points, COMPARE_POINTS}):
        label = f"chart?max_points={points} ({state})"
        answer = get(client, f"{url}/chart", max_points=points).json()
        assert answer["last_step"] == steps[-1], f"{label}: last_step {answer['last_step']}"
        span = steps[-1] - steps[0] + 1
        assert (answer["level"] == 0) == (span <= points), (
            f"{label}: level {answer['level']} for {span} steps")
        check_chart(label, answer, model, None, 0, LAST_STEP, settled)
    for chosen in (None, names):
        params: dict[str, Any] = {"x0": probe.x0, "x1": probe.x1,
                                  "max_points": probe.chart_points}
        if chosen:
            params["names"] = ",".join(chosen)
        label = f"chart?{'&'.join(f'{k}={v}' for k, v in params.items())} ({state})"
        answer = get(client, f"{url}/chart", **params).json()
        if settled:
            lo, hi = max(probe.x0, steps[0]), min(probe.x1, steps[-1])
            assert (answer["level"] == 0) == (max(hi - lo + 1, 0) <= probe.chart_points), (
                f"{label}: level {answer['level']} for steps {lo}..{hi}")
        check_chart(label, answer, model, chosen, probe.x0, probe.x1, settled)

    check_compare(client, run_id, other, model)
    check_export(client, run_id, model)
    check_findings(client, run_id, model)


def nothing_waits(run_id: int) -> bool:
    """Whether every step the run received is settled (what readers merge: none waits)."""
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        return not waiting.rows(db, run)


def tell_what_is_sent(model: Model, rows: Iterable[Row]) -> None:
    """Hypothesis' statistics (``--hypothesis-show-statistics``): which cases the streams hold."""
    last = max(model.steps(), default=-1)
    for step, metrics in rows:
        for name, value in metrics.items():
            if step in model.points.get(name, {}):
                event("a waiting step re-sent" if step in model.waiting.get(name, {})
                      else "a settled step re-sent")
            if not math.isfinite(value):
                event(f"{value} sent")
        if len(metrics) < len(model.points):
            event("a step with only some metrics")
        if step < last:
            event("a step out of order")
        if step == LAST_STEP:
            event("step 2**31-1")
        last = max(last, step)
    steps = model.steps()
    if steps and steps[-1] - steps[0] > 70_000:
        event("a run past 70,000 steps")


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(stream=streams())
@example(stream=EVERYTHING)
@example(stream=LIVE)
@example(stream=RE_SENT_IN_THE_LAST_BUCKET)
def test_every_reader_answers_the_model(client: TestClient, stream: Stream) -> None:
    # the failing stream, as Python (with ``from math import nan, inf``): pytest here shows
    # hypothesis' own "Failing test case" line without its arguments
    note(f"stream = {pformat(stream, width=100)}")
    run_id, headers = running_run(client, max_steps=1000)
    other, other_headers = running_run(client, max_steps=1000)  # the compare page's second run
    post(client, other, other_headers, [(s, {name: 0.5 for name in NAMES}) for s in (1, 2, 3)])
    model = Model()
    for at, batch in enumerate(stream.batches):
        tell_what_is_sent(model, batch.rows)
        post(client, run_id, headers, batch.rows)
        model.write(batch.rows)
        if batch.settle:
            settle_now(run_id)
        if nothing_waits(run_id):  # settled here, or by ingest itself (a long stale range)
            model.settle()
        else:
            assert not batch.settle, "steps still wait after a settle"
        if batch.probe is not None:
            note(f"read after batch {at}")
            check_readers(client, run_id, other, model, batch.probe)
    note("read at the end")
    check_readers(client, run_id, other, model, stream.final)
    settle_now(run_id)
    assert nothing_waits(run_id), "steps still wait after a settle"
    model.settle()
    note("read at the end, settled")
    check_readers(client, run_id, other, model, stream.final)
