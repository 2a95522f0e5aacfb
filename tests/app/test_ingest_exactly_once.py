"""Ingest through the report API on both backends, on the paths bench/ingest.py made faster:
a big batch (one inbox row per step, spread into points on the first read) sent again after a
lost reply, out of order and with NaN/inf, must leave each (run, step, name) stored once with the value sent last,
level-1 chart summaries equal to the points, and a run's first batch diagnosed as if its state
had been rebuilt from the stored points."""

from __future__ import annotations

import json
import math

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.health import state_cache
from app.runs.models import Run
from tests.app.conftest import running_run
from tests.app.test_chart_rollups import _expected, _stored
from tests.settled import point_count, settle

NAMES = [f"m{i}" for i in range(20)] + ["reward", "reward_std", "kl", "entropy", "loss"]
STEPS = 100  # x 25 metrics = 2,500 points, one inbox row per step, spread on the first read


def _rows(attempt: int, steps: list[int]) -> list[dict]:  # type: ignore[type-arg]
    return [{"step": s, "metrics": {n: math.cos(s + i) + attempt for i, n in enumerate(NAMES)}}
            for s in steps]


def _post(client: TestClient, run_id: int, headers: dict[str, str], rows: list) -> int:  # type: ignore[type-arg]
    reply = client.post(f"/api/runs/{run_id}/metrics", content=json.dumps({"rows": rows}),
                        headers={**headers, "Content-Type": "application/json"})  # NaN as sent
    assert reply.status_code == 200, reply.text
    return int(reply.json()["accepted"])


def test_a_resent_big_batch_is_stored_once_with_the_values_sent_last(client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert _post(client, run_id, headers, _rows(0, list(range(1, STEPS + 1)))) == STEPS * 25
    # the same batch again (its reply was lost), steps out of order, some values not finite
    again = _rows(1, list(range(STEPS, 0, -1)))
    again[0]["metrics"]["loss"] = math.nan
    again[1]["metrics"]["kl"] = math.inf
    again[2]["metrics"]["reward"] = -math.inf
    assert _post(client, run_id, headers, again) == STEPS * 25
    points, rollups = _stored(run_id)
    assert len(points) == STEPS * 25
    stored = {(p.step, p.name): (p.value, p.raw) for p in points}
    assert stored[(STEPS, "loss")] == (None, "nan")
    assert stored[(STEPS - 1, "kl")] == (None, "inf")
    assert stored[(STEPS - 2, "reward")] == (None, "-inf")
    assert stored[(1, "m3")] == (math.cos(1 + 3) + 1, None)  # the re-sent value, not the first
    expected = _expected(points)
    assert {k: v for k, v in rollups.items() if k[0] == 2} == {
        k: v for k, v in expected.items() if k[0] == 2}
    with get_sessionmaker()() as db:
        assert db.get_bind().dialect.name in ("sqlite", "postgresql")
        total = point_count(db, run_id)
    assert total == STEPS * 25


def test_an_older_step_sent_after_a_big_batch_is_added_not_lost(client: TestClient) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, _rows(0, list(range(200, 200 + STEPS))))
    _post(client, run_id, headers, _rows(5, list(range(1, STEPS + 1))))  # earlier steps, later
    points, _ = _stored(run_id)
    assert len(points) == 2 * STEPS * 25
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None and run.current_step == 200 + STEPS - 1  # never moved back


def _findings(client: TestClient, run_id: int) -> list[tuple]:  # type: ignore[type-arg]
    body = client.get(f"/api/runs/{run_id}/findings").json()
    return [body["verdict"]] + sorted((f["category"], f.get("metric"), f["severity"],
                                       f["first_step"], f["last_step"]) for f in body["findings"])


def _dead_rows(steps: range) -> list[dict]:  # type: ignore[type-arg]
    """Every group's rewards identical (no learning signal): an exact signal, shown at once."""
    return [{"step": s, "metrics": {"reward": 0.5, "reward_std": 0.0,
                                    "frac_reward_zero_std": 1.0, "loss": 0.0,
                                    "entropy": 1.0 + 0.01 * s, "kl": 0.0}} for s in steps]


def test_a_first_batch_is_diagnosed_like_a_state_rebuilt_from_the_points(
        client: TestClient) -> None:
    first, first_headers = running_run(client)
    _post(client, first, first_headers, _dead_rows(range(1, 12)))  # all of it in the first batch
    rebuilt, rebuilt_headers = running_run(client)
    _post(client, rebuilt, rebuilt_headers, _dead_rows(range(1, 2)))
    state_cache.forget(rebuilt)  # a restart: the next batch rebuilds the state from the points
    _post(client, rebuilt, rebuilt_headers, _dead_rows(range(2, 12)))
    found = _findings(client, first)
    assert len(found) > 1, found  # the signal is there to be found
    assert found == _findings(client, rebuilt)


def test_deleting_a_finished_run_deletes_its_points(client: TestClient) -> None:
    """PostgreSQL's points have no foreign key to cascade (migration ingest_0001)."""
    doomed, headers = running_run(client)
    kept, kept_headers = running_run(client)
    for run_id, h in ((doomed, headers), (kept, kept_headers)):
        _post(client, run_id, h, _rows(0, list(range(1, STEPS + 1))))
        assert client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0},
                           headers=h).status_code == 200
    assert client.delete(f"/api/runs/{doomed}").status_code == 204
    with get_sessionmaker()() as db:
        settle(db, [kept])
        left = {run_id: point_count(db, run_id) for run_id in (doomed, kept)}
    assert left == {doomed: 0, kept: STEPS * 25}
