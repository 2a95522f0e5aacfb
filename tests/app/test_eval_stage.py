"""Evaluating is a stage (issue 34): a 6.5-minute evaluation showed "training" with the step
and the ETA frozen. The child's "evaluating n/m" line travels through the log batch to the run
page's stage words, and the ETA counts the evaluation under way and those still ahead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.metrics.ingest import _update_progress
from app.runs.models import Run
from app.runs.progress import progress, record_stage
from grpodeck.contract.wire import EvalProgress as Progressed
from grpodeck.contract.wire import parse_stage_line, stage_line
from tests.app.conftest import running_run
from worker.training.eval_progress import EvalProgress

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _run(**spec: object) -> Run:
    return Run(status="running", max_steps=40, current_step=10, seconds_per_step=2.0,
               spec={"eval_split": "test", "eval_steps": 10, **spec}, stage=None,
               eval_progress=None, started_at=T0 - timedelta(minutes=5))


def test_the_eta_counts_the_evaluation_under_way_and_those_ahead() -> None:
    run = _run()
    assert progress(run, T0).eta_s == 30 * 2.0  # no evaluation seen yet: steps only
    record_stage(run, "evaluating", 0, 12, T0)
    record_stage(run, "evaluating", 3, 12, T0 + timedelta(seconds=30))  # same evaluation
    now = T0 + timedelta(seconds=60)
    # 60 steps' time + this one (3 of 12 in 60 s: 180 s left) + 3 more at 240 s (steps 20, 30, 40)
    assert progress(run, now).eta_s == 60 + 180 + 3 * 240
    record_stage(run, "evaluating", 9, 12, T0 + timedelta(seconds=90))
    # 9 of 12 in 90 s: 30 s left, and 120 s for each of the 3 ahead
    assert progress(run, T0 + timedelta(seconds=90)).eta_s == 60 + 30 + 3 * 120
    record_stage(run, "training", None, None, T0 + timedelta(seconds=200))
    assert run.eval_progress == {"last_s": 200.0, "ended": (T0 + timedelta(seconds=200)).isoformat()}
    assert progress(run, T0 + timedelta(seconds=300)).eta_s == 60 + 3 * 200


def test_the_default_eval_interval_is_the_workers() -> None:
    run = _run(eval_steps=None)  # the worker evaluates every max_steps // 4 = 10 steps
    record_stage(run, "evaluating", 0, 4, T0)
    record_stage(run, "training", None, None, T0 + timedelta(seconds=50))
    assert progress(run, T0 + timedelta(seconds=60)).eta_s == 60 + 3 * 50
    run.spec = {}  # no eval split: no evaluation ahead
    assert progress(run, T0).eta_s == 60


def test_stage_lines_round_trip_and_foreign_lines_are_ignored() -> None:
    assert parse_stage_line(stage_line("evaluating", (3, 12))) == (
        "evaluating", Progressed(done=3, total=12))
    assert parse_stage_line(stage_line("training")) == ("training", None)
    assert parse_stage_line(stage_line("saving")) == ("saving", None)
    assert parse_stage_line("[grpodeck] stage: hacking 1/2") is None  # user code's prints
    assert parse_stage_line("evaluating 3/12") is None
    assert parse_stage_line("[grpodeck] stage: evaluating 3/0") == ("evaluating", None)


def test_the_callback_says_each_batch_at_most_once_a_second_and_training_after() -> None:
    said: list[str] = []
    now = [0.0]
    callback = EvalProgress(say=lambda line, flush: said.append(line), clock=lambda: now[0])
    state = SimpleNamespace(is_world_process_zero=True)
    for at in (0.0, 0.2, 0.4, 1.5, 1.6):  # batches 1..5: the first, one after 1 s, the last
        now[0] = at
        callback.on_prediction_step(None, state, None, eval_dataloader=[0] * 5)
    callback.on_evaluate(None, state, None)
    assert [parse_stage_line(line) for line in said] == [
        ("evaluating", Progressed(done=1, total=5)), ("evaluating", Progressed(done=4, total=5)),
        ("evaluating", Progressed(done=5, total=5)), ("training", None)]
    quiet = EvalProgress(say=lambda line, flush: said.append(line))
    quiet.on_prediction_step(None, SimpleNamespace(is_world_process_zero=False), None,
                             eval_dataloader=[0])
    assert len(said) == 4  # only rank 0 speaks


def test_the_run_page_shows_evaluating_n_of_m_batches(client: TestClient) -> None:
    run_id, headers = running_run(client, eval_split="test", eval_steps=10, max_steps=40)
    rows = [{"step": s, "metrics": {"reward": 0.1}} for s in range(1, 11)]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    sent = client.post(f"/api/runs/{run_id}/logs", headers=headers, json={
        "chunks": [], "stage": "evaluating", "eval_progress": {"done": 3, "total": 12}})
    assert sent.status_code == 200, sent.text
    page = BeautifulSoup(client.get(f"/runs/{run_id}/_status").text, "html.parser")
    assert page.select_one("#run-stage strong").text == "evaluating (3 of 12 batches)"
    assert page.select_one("#run-stages [aria-current=step]").text == "evaluating"
    client.post(f"/api/runs/{run_id}/logs", headers=headers, json={"stage": "training"})
    page = BeautifulSoup(client.get(f"/runs/{run_id}/_status").text, "html.parser")
    assert page.select_one("#run-stage strong").text == "training"
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None and set(run.eval_progress or {}) == {"last_s", "ended"}
    bad = client.post(f"/api/runs/{run_id}/logs", headers=headers, json={
        "stage": "evaluating", "eval_progress": {"done": -1, "total": 0}})
    assert bad.status_code == 422


def test_seconds_per_step_leaves_the_evaluation_out() -> None:
    """Issue 56 (8a): the step after an evaluation took the evaluation's minute too, and the
    pace (s / step, the runs list's steps/s) jumped from 2 s to 20 s; now only training time
    counts, also while the evaluation is still under way when the step arrives."""
    run = _run()
    run.last_step_at = T0  # step 10 reported
    record_stage(run, "evaluating", 0, 12, T0 + timedelta(seconds=1))
    record_stage(run, "training", None, None, T0 + timedelta(seconds=61))
    _update_progress(run, 11, T0 + timedelta(seconds=63))  # 3 s of training
    assert run.seconds_per_step == pytest.approx(0.7 * 2.0 + 0.3 * 3.0)
    record_stage(run, "evaluating", 0, 12, T0 + timedelta(seconds=64))  # its "training" line
    _update_progress(run, 12, T0 + timedelta(seconds=130))               # comes after the step
    assert run.seconds_per_step == pytest.approx(0.7 * 2.3 + 0.3 * 1.0)
    record_stage(run, "training", None, None, T0 + timedelta(seconds=130))
    _update_progress(run, 13, T0 + timedelta(seconds=132))  # no evaluation in between
    assert run.seconds_per_step == pytest.approx(0.7 * 1.91 + 0.3 * 2.0)


def test_the_stage_timer_restarts_when_training_resumes(client: TestClient) -> None:
    """Issue 56 (8a): after an evaluation the stage line said "training · for" the whole run;
    it counts from the evaluation's end, when training resumed."""
    run_id, headers = running_run(client, eval_split="test", eval_steps=10, max_steps=40)
    rows = [{"step": s, "metrics": {"reward": 0.1}} for s in range(1, 11)]
    assert client.post(f"/api/runs/{run_id}/metrics", json={"rows": rows},
                       headers=headers).status_code == 200
    page = BeautifulSoup(client.get(f"/runs/{run_id}/_status").text, "html.parser")
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None and run.started_at is not None
        started = run.started_at.replace(tzinfo=UTC).isoformat()
    assert page.select_one("#stage-timer")["data-since"] == started  # training from the start
    client.post(f"/api/runs/{run_id}/logs", headers=headers, json={
        "stage": "evaluating", "eval_progress": {"done": 1, "total": 4}})
    client.post(f"/api/runs/{run_id}/logs", headers=headers, json={"stage": "training"})
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        assert run is not None and run.eval_progress is not None
        ended = run.eval_progress["ended"]
    page = BeautifulSoup(client.get(f"/runs/{run_id}/_status").text, "html.parser")
    assert page.select_one("#run-stage strong").text == "training"
    assert page.select_one("#stage-timer")["data-since"] == ended != started
