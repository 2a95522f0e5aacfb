"""Chart summaries (app/metrics/rollups.py) and the chart endpoint, on both backends.

The summaries are checked against a recomputation from the stored points in Python, after
batches that overlap, re-send a step with a new value, carry NaN/inf, and one import-sized batch
(settled by ingest itself, past SETTLE_EVERY_STEPS): whatever the history of writes, every level
must equal the points.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import get_sessionmaker
from app.ingest import pipeline
from app.metrics.models import InboxStep, MetricRollup
from app.metrics.rollups import (
    BUCKET_WEIGHT,
    FACTOR,
    LEVELS,
    STORED_FROM,
    catch_up,
    chart_data,
    merge_factor,
    pick_level,
)
from app.runs.models import Run
from app.runs.service import get_run_for_update
from tests.app.conftest import running_run
from tests.settled import point_count, settle, stored_points


def _receive(run_id: int, rows: list[tuple[int, dict[str, float]]]) -> None:
    with get_sessionmaker()() as db:
        run = get_run_for_update(db, run_id)
        assert run is not None
        pipeline.receive(db, run, rows)
        db.commit()


@dataclass(frozen=True)
class Point:
    """A settled point; ``value`` None for a NaN/inf (the summaries count those apart)."""

    name: str
    step: int
    value: float | None
    raw: str | None = None  # its text ("nan", "inf", "-inf") when not finite


def _expected(points: list[Point]) -> dict[tuple[int, str, int], tuple]:
    """Every level's buckets computed straight from the points."""
    out: dict[tuple[int, str, int], tuple] = {}
    for level in range(STORED_FROM, LEVELS + 1):
        groups: dict[tuple[str, int], list[Point]] = defaultdict(list)
        for p in points:
            groups[(p.name, p.step // FACTOR ** level)].append(p)
        for (name, bucket), ps in groups.items():
            finite = [p.value for p in ps if p.value is not None]
            bad = [p for p in ps if p.value is None]
            out[(level, name, bucket)] = (
                len(finite), round(sum(finite), 9) if finite else None,
                min(finite, default=None), max(finite, default=None),
                min(p.step for p in ps), max(p.step for p in ps), len(bad),
                min((p.step for p in bad), default=None))
    return out


def _stored(run_id: int) -> tuple[list[Point], dict[tuple[int, str, int], tuple]]:
    with get_sessionmaker()() as db:
        settle(db, [run_id])
        points = [Point(name, step, value, raw)
                  for (step, name), (value, raw) in stored_points(db, run_id).items()]
        rollups = {(r.level, r.name, r.bucket): (
            r.n, round(r.vsum, 9) if r.vsum is not None else None, r.vmin, r.vmax,
            r.first_step, r.last_step, r.nonfinite, r.nonfinite_step)
            for r in db.scalars(select(MetricRollup).where(MetricRollup.run_id == run_id))}
    return points, rollups


def test_every_level_equals_the_points_after_overlaps_resends_and_nonfinite(
        client: TestClient) -> None:
    run_id, _ = running_run(client)
    for start in range(0, 600, 37):  # batches across bucket edges, overlapping by 3 steps
        rows = [(s, {"reward": math.sin(s), "kl": s * 0.01}) for s in range(start, start + 40)]
        _receive(run_id, rows)
    _receive(run_id, [(300, {"reward": 50.0, "kl": math.nan}), (301, {"kl": math.inf})])
    _receive(run_id, [(17, {"reward": -9.0})])  # a late re-send with a new value
    with get_sessionmaker()() as db:  # ingest stored the steps as received and marked them ...
        run = db.get(Run, run_id)
        assert run is not None and (run.rollups_stale_lo, run.rollups_stale_hi) == (0, 631)
        assert db.scalar(select(func.count()).select_from(InboxStep)) == 632
        assert point_count(db) == 0
        catch_up(db, run)  # ... which the next read spreads into points and summaries
        assert db.get(Run, run_id).rollups_stale_lo is None
        assert db.scalar(select(func.count()).select_from(InboxStep)) == 0
    points, rollups = _stored(run_id)
    assert len(points) == 2 * 632 and rollups == _expected(points)
    # one import-sized batch: its stale range passes SETTLE_EVERY_STEPS, so ingest settles it
    _receive(run_id, [(s, {"reward": 0.5, "loss": 1.0 / s}) for s in range(700, 5000)])
    with get_sessionmaker()() as db:
        assert db.get(Run, run_id).rollups_stale_lo is None
    points, rollups = _stored(run_id)
    assert len(points) == 2 * 632 + 2 * 4300  # steps 0..631 of reward and kl, then 700..4999
    expected = _expected(points)
    assert rollups == expected
    wide = FACTOR ** STORED_FROM  # the finest stored level (level 1 is drawn from the points)
    assert rollups[(2, "reward", 300 // wide)][3] == 50.0  # the spike is the bucket max
    assert rollups[(2, "kl", 300 // wide)][6:] == (2, 300)  # NaN and inf, first at 300
    assert rollups[(2, "reward", 17 // wide)][2] == -9.0  # the re-sent value, not the old


def test_a_long_run_is_drawn_from_a_coarse_level_and_zoom_reads_the_finer_one(
        client: TestClient) -> None:
    run_id, _ = running_run(client)
    rows = [(s, {"reward": 0.1 * math.sin(s / 50) + (7.0 if s == 12_345 else 0.0),
                 "loss": math.nan if s == 20_000 else 1.0}) for s in range(1, 30_001)]
    for i in range(0, len(rows), 5_000):
        _receive(run_id, rows[i:i + 5_000])
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        whole = chart_data(db, run, max_points=300)
    # level 2 (118 buckets of 256 steps) weighs 472 raw points: two buckets are drawn as one
    assert whole.level == 2 and whole.width == 512 and whole.last_step == 30_000
    assert all(len(s.steps) * BUCKET_WEIGHT <= 300 + BUCKET_WEIGHT for s in whole.series.values())
    reward = whole.series["reward"]
    assert max(reward.highs or []) == 7.0 + 0.1 * math.sin(12_345 / 50)  # the spike: in the band
    assert max(reward.values) < 1  # the line is the buckets' means, not their extremes
    assert reward.counts == [511, *[512] * (len(reward.counts or []) - 2), 30_000 % 512 + 1]
    assert any(math.isnan(v) for v in whole.series["loss"].values)  # the NaN keeps a marker

    reply = client.get(f"/api/runs/{run_id}/chart",
                       params={"x0": 12_300, "x1": 12_400, "max_points": 200})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["level"] == 0 and body["width"] == 1 and body["last_step"] == 30_000
    steps = body["series"]["reward"]["steps"]
    assert steps == list(range(12_300, 12_401))  # raw points of the visible range only
    assert body["series"]["reward"]["values"][45] == rows[12_344][1]["reward"]
    mid = client.get(f"/api/runs/{run_id}/chart", params={"x0": 0, "x1": 10_000,
                                                         "max_points": 2_000}).json()
    assert mid["level"] == 1  # whole buckets: the last one may reach past the range's end
    assert max(mid["series"]["reward"]["steps"]) <= 10_000 + mid["width"] - 1


def test_joined_buckets_are_the_min_max_mean_and_count_of_their_steps(
        client: TestClient) -> None:
    """A 10k-step run at the page's budget: level 1's 625 buckets are drawn two by two, and
    each drawn bucket is exactly its 32 steps (a NaN keeps its marker)."""
    run_id, _ = running_run(client)
    value = {s: math.cos(s / 7) * (1 + s % 5) for s in range(1, 10_001)}
    rows = [(s, {"reward": math.nan if s == 4_444 else v}) for s, v in value.items()]
    _receive(run_id, rows)
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None
        data = chart_data(db, run, max_points=2_000)
    assert (data.level, data.width) == (1, 32)
    reward = data.series["reward"]
    drawn = [p for p in zip(reward.steps, reward.values, reward.lows or [], reward.highs or [],
                            reward.counts or [], strict=True) if not math.isnan(p[1])]
    assert len(drawn) == 313  # ceil(10_001 / 32) buckets, aligned at step 0
    for k, (_, mean, low, high, count) in enumerate(drawn):
        steps = [s for s in range(k * 32, k * 32 + 32) if s in value and s != 4_444]
        assert count == len(steps)
        assert (low, high) == (min(value[s] for s in steps), max(value[s] for s in steps))
        assert math.isclose(mean, sum(value[s] for s in steps) / len(steps))
    means = dict(zip(reward.steps, reward.values, strict=True))
    assert math.isnan(means[4_444])


def test_no_run_length_draws_more_buckets_than_its_page_budget_weighs() -> None:
    """The page of a 10k-step run weighed more than a 100k-step one: what is drawn is bounded
    by ``max_points`` raw points' worth at every length, and never coarser than it must be."""
    for budget in (300, 2_000):
        for steps in (1_000, 2_001, 5_000, 10_000, 16_000, 31_999, 100_000, 1_000_000):
            level = pick_level(steps, budget)
            if level == 0:
                continue
            merge = merge_factor(steps, level, budget)
            drawn = math.ceil(steps / (FACTOR ** level * merge))
            assert drawn * BUCKET_WEIGHT <= budget + BUCKET_WEIGHT, (budget, steps)
            assert merge <= 2 and (merge == 1 or math.ceil(steps / FACTOR ** level)
                                   * BUCKET_WEIGHT > budget), (budget, steps)


def test_the_chart_endpoint_says_what_is_wrong(client: TestClient) -> None:
    run_id, _ = running_run(client)
    reply = client.get(f"/api/runs/{run_id}/chart", params={"x0": 10, "x1": 5})
    assert reply.status_code == 422 and "before x0" in reply.json()["detail"]
    assert client.get("/api/runs/999999/chart").status_code == 404
    empty = client.get(f"/api/runs/{run_id}/chart").json()
    assert empty == {"level": 0, "width": 1, "last_step": 0, "series": {}}
