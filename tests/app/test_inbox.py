"""Ingest stores a batch as one inbox row per step (``app/metrics/inbox.py``) and leaves the
per-metric points and summaries to the background settler: every reader must see a batch the
moment its reply came back, as if it had been spread at once, by merging the waiting steps
(``app/metrics/waiting.py``). One test per reader that reads the points or summaries; no
settler runs in these in-process tests, so every read here sees the steps still waiting."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.config import get_settings
from app.core.db import get_sessionmaker
from app.health import state_cache
from app.health.models import DiagnosticsRecord
from app.launch import smoke
from app.listing.row_numbers import row_numbers
from app.metrics import inbox, settler
from app.metrics.models import InboxStep
from app.runs import lifecycle
from app.runs.models import Run
from tests.app.conftest import running_run


def _post(client: TestClient, run_id: int, headers: dict[str, str],
          rows: list[dict]) -> None:  # type: ignore[type-arg]
    reply = client.post(f"/api/runs/{run_id}/metrics", content=json.dumps({"rows": rows}),
                        headers={**headers, "Content-Type": "application/json"})  # NaN as sent
    assert reply.status_code == 200, reply.text


def _rows(steps: range, **metrics: float) -> list[dict]:  # type: ignore[type-arg]
    return [{"step": s, "metrics": {"reward": s / 10, "kl": 0.01 * s, **metrics}} for s in steps]


def _waiting(run_id: int) -> int:
    with get_sessionmaker()() as db:
        return db.scalar(select(func.count()).select_from(InboxStep)
                         .where(InboxStep.run_id == run_id)) or 0


def test_a_batch_waits_in_the_inbox_until_the_settler_spreads_it(client: TestClient) -> None:
    """A read sees the waiting steps but leaves them waiting (it never takes the run's write
    lock); the settler's pass spreads them, and the chart reads the same."""
    run_id, headers = running_run(client)
    _post(client, run_id, headers, _rows(range(1, 6)))
    assert _waiting(run_id) == 5  # stored as received: one row per step
    before = client.get(f"/api/runs/{run_id}/chart").json()
    assert before["series"]["reward"]["steps"] == [1, 2, 3, 4, 5] and before["last_step"] == 5
    assert _waiting(run_id) == 5
    assert settler.settle_all(get_sessionmaker()) == 1
    assert _waiting(run_id) == 0
    assert client.get(f"/api/runs/{run_id}/chart").json() == before


def test_a_live_chart_polling_after_a_step_gets_the_latest_batch(client: TestClient) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, _rows(range(1, 4)))
    assert client.get(f"/api/runs/{run_id}/metrics?after=0").json()["reward"]["steps"] == [1, 2, 3]
    _post(client, run_id, headers, _rows(range(4, 6), loss=math.nan))
    body = client.get(f"/api/runs/{run_id}/metrics?after=3").json()
    assert body["reward"] == {"steps": [4, 5], "values": [0.4, 0.5]}
    assert body["loss"] == {"steps": [4, 5], "values": ["nan", "nan"]}


def test_the_runs_list_shows_the_last_batchs_numbers(client: TestClient) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, _rows(range(1, 60)))
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        numbers = row_numbers(db, [run])[run_id]
    assert (numbers.reward, numbers.best, numbers.kl) == (5.9, 5.9, 0.59)
    assert len(numbers.spark_values) >= 2 and numbers.spark_values[-1] > numbers.spark_values[0]


def test_a_smoke_tests_verdict_reads_the_last_batch(client: TestClient) -> None:
    run_id, headers = running_run(client)
    with get_sessionmaker()() as db:
        db.get(Run, run_id).smoke_full_steps = 100
        db.commit()
    _post(client, run_id, headers, [{"step": s, "metrics": {
        "reward_std": 0.3, "frac_reward_zero_std": 0.0, "reward": 0.1 * s, "loss": 0.5 - s / 10,
        "kl": 0.001 * s}} for s in range(1, 4)])
    with get_sessionmaker()() as db:
        report = smoke.report(db, db.get(Run, run_id))
    assert report["steps"] == 3 and report["rewards_vary"] is True


def test_an_ended_run_leaves_nothing_waiting(client: TestClient) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, _rows(range(1, 30)))
    assert client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0},
                       headers=headers).status_code == 200
    assert _waiting(run_id) == 0
    with get_sessionmaker()() as db:
        assert db.get(Run, run_id).rollups_stale_lo is None


def test_diagnostics_rebuilt_after_a_restart_read_the_steps_still_waiting(
        client: TestClient, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A web process restarts between batches: the diagnostics state it stored (if any: it is
    stored at most hourly here) is older than the steps stored since, which are still in the
    inbox; the rebuilt state must include them, so it diagnoses what a process that never
    restarted does."""
    monkeypatch.setattr(get_settings(), "diagnostics_persist_seconds", 3600.0)
    dead = {"reward_std": 0.0, "frac_reward_zero_std": 1.0, "reward": 0.5, "loss": 0.0,
            "entropy": 1.0}
    findings = []
    for restart in (False, True):
        run_id, headers = running_run(client)
        for start in range(1, 40, 3):
            _post(client, run_id, headers, [{"step": s, "metrics": dead}
                                            for s in range(start, start + 3)])
        if restart:
            state_cache.forget(run_id)
            with get_sessionmaker()() as db:  # at most the first batch's state was stored
                record = db.get(DiagnosticsRecord, run_id)
                assert record is None or record.through <= 3
        _post(client, run_id, headers, [{"step": 40, "metrics": dead}])
        assert _waiting(run_id) == 40
        body = client.get(f"/api/runs/{run_id}/findings").json()
        findings.append(sorted((f["category"], f["first_step"], f["last_step"])
                               for f in body["findings"]))
    assert findings[0] and findings[0] == findings[1]


def test_deleting_a_run_lost_with_steps_waiting_deletes_them(client: TestClient) -> None:
    """A run failed as lost never sent its end report, so nothing settled its last batches."""
    doomed, headers = running_run(client)
    kept, kept_headers = running_run(client)
    for run_id, h in ((doomed, headers), (kept, kept_headers)):
        _post(client, run_id, h, _rows(range(1, 8)))
    with get_sessionmaker()() as db:
        lifecycle.fail(db.get(Run, doomed), "worker lost")
        db.commit()
    assert client.delete(f"/api/runs/{doomed}").status_code == 204
    assert (_waiting(doomed), _waiting(kept)) == (0, 7)


def test_the_wal_is_checkpointed_after_a_batch_not_by_its_commit(
        client: TestClient, app_db: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """SQLite: a report batch's commit no longer copies the WAL into the database (the
    autocheckpoint is a 64 MiB backstop); the background task after its reply does."""
    if not app_db.startswith("sqlite"):
        return  # PostgreSQL has no WAL of ours to checkpoint: the task does nothing there
    from app.core import db as db_module

    database = Path(app_db.split("///", 1)[1])
    run_id, headers = running_run(client)
    wide = {f"metric/number_{i}": 0.5 for i in range(25)}  # ~600 B a step
    monkeypatch.setattr(db_module, "_last_checkpoint", [time.monotonic() + 3600])  # not due
    initial = database.stat().st_size
    for start in range(1, 8000, 500):  # ~5 MB of WAL: past SQLite's default 1,000 pages
        _post(client, run_id, headers, _rows(range(start, start + 500), **wide))
    before = database.stat().st_size
    assert before - initial < 50_000  # no commit checkpointed: all of it is in the WAL
    monkeypatch.setattr(db_module, "_last_checkpoint", [0.0])  # due
    _post(client, run_id, headers, _rows(range(8001, 8003), **wide))
    assert database.stat().st_size > before + 3_000_000  # copied in after that reply


def test_a_summarised_chart_counts_the_waiting_steps_as_the_settled_one_does(
        client: TestClient) -> None:
    """A chart above level 0 folds the waiting steps into buckets in memory: its buckets hold
    the same counts, extremes and means as the summaries the settler then writes."""
    run_id, headers = running_run(client)
    _post(client, run_id, headers, _rows(range(1, 1001)))
    with get_sessionmaker()() as db:
        settler.settle_run(db, run_id)  # the first 1,000 steps settled, the next 700 waiting
    _post(client, run_id, headers, _rows(range(1001, 1701)))
    assert _waiting(run_id) == 700
    url = f"/api/runs/{run_id}/chart?names=reward&max_points=300"
    waiting = client.get(url).json()
    settler.settle_all(get_sessionmaker())
    settled = client.get(url).json()
    assert waiting["level"] == settled["level"] >= 1 and waiting["last_step"] == 1700
    before, after = waiting["series"]["reward"], settled["series"]["reward"]
    assert sum(before["n"]) == sum(after["n"]) == 1700
    assert (before["n"], before["min"], before["max"]) == (after["n"], after["min"], after["max"])
    assert all(math.isclose(a, b) for a, b in zip(before["values"], after["values"], strict=True))


def test_waiting_steps_picked_by_name_keep_their_values_and_drop_what_is_not_asked(
        client: TestClient) -> None:
    """What the runs list reads of a live run's inbox (``inbox.pending(names=...)``): only the
    named metrics, NaN/inf restored, a re-sent step merged, a step with none of them left out."""
    run_id, headers = running_run(client)
    _post(client, run_id, headers, [
        {"step": 1, "metrics": {"reward": 0.5, "kl": 0.1, "loss": 2.0}},
        {"step": 2, "metrics": {"loss": 1.5}},
        {"step": 3, "metrics": {"reward": "nan", "kl": "inf", "entropy": 0.7}}])
    _post(client, run_id, headers, [{"step": 1, "metrics": {"reward": 0.75}}])  # re-sent
    with get_sessionmaker()() as db:
        picked = inbox.pending(db, run_id, -1, ("reward", "kl", "frac_reward_zero_std"))
        whole = inbox.pending(db, run_id, -1)
    assert [step for step, _ in picked] == [1, 3]
    assert picked[0][1] == {"reward": 0.75, "kl": 0.1}
    assert math.isnan(picked[1][1]["reward"]) and picked[1][1]["kl"] == math.inf
    assert set(picked[1][1]) == {"reward", "kl"}
    assert {step: {k: v for k, v in m.items() if k in ("reward", "kl")} for step, m in whole
            if step != 3} == {1: picked[0][1], 2: {}}
