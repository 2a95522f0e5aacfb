"""Status changes against an expectation written down here, independently of
``lifecycle.ALLOWED``: a wrong entry in the product's table fails these tests, and random event
sequences (hypothesis) never reach an illegal state."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.runs import lifecycle
from app.runs.lifecycle import Status, TransitionError
from app.runs.models import Run

# What a run may become from each status. A finished run (succeeded, failed, cancelled) and an
# imported log never change again; a queued run fails when the broker refuses it.
EXPECTED: dict[str, set[str]] = {
    "queued": {"running", "cancelled", "failed"},
    "running": {"succeeded", "failed", "cancelled"},
    "succeeded": set(),
    "failed": set(),
    "cancelled": set(),
    "imported": set(),
}
FINAL = {"succeeded", "failed", "cancelled", "imported"}
LIVE = {"queued", "running"}  # pages poll these, the lost check watches these


def make(status: str) -> Run:
    return Run(id=1, name="r", spec={}, status=status, max_steps=10, current_step=0)


def test_the_expectation_names_every_status() -> None:
    assert set(EXPECTED) == {s.value for s in Status}


@pytest.mark.parametrize("start", sorted(EXPECTED))
@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_every_pair_follows_the_expectation(start: str, target: str) -> None:
    run = make(start)
    if target in EXPECTED[start]:
        lifecycle.transition(run, Status(target))
        assert run.status == target
    else:
        with pytest.raises(TransitionError):
            lifecycle.transition(run, Status(target))
        assert run.status == start and run.finished_at is None


@pytest.mark.parametrize("status", sorted(EXPECTED))
def test_only_queued_and_running_are_live(status: str) -> None:
    assert lifecycle.is_live(make(status)) is (status in LIVE)
    assert (Status(status) in lifecycle.TERMINAL) is (status in FINAL)


def test_start_and_finish_stamp_their_times() -> None:
    run = make("queued")
    lifecycle.start(run, pid=1, host="h")
    assert run.started_at is not None and run.finished_at is None
    assert (run.worker_pid, run.worker_host) == (1, "h")
    run.last_step_at = run.started_at
    lifecycle.finish(run, 0, None, None)
    assert run.status == "succeeded" and run.finished_at >= run.started_at


def test_a_run_that_logged_no_step_is_not_a_success() -> None:
    run = make(Status.QUEUED)
    lifecycle.start(run, pid=1, host="h")
    lifecycle.finish(run, 0, None, None)
    assert run.status == Status.FAILED and "without logging a single step" in run.error


def test_cancel_queued_is_immediate_and_running_is_a_request() -> None:
    queued = make("queued")
    lifecycle.request_cancel(queued)
    assert queued.status == "cancelled" and queued.stop_reason == "cancelled by user"
    running = make("running")
    lifecycle.request_cancel(running, reason="first")
    lifecycle.request_cancel(running, reason="second")  # a repeated click keeps the first
    assert running.status == "running" and running.cancel_requested_at is not None
    assert running.stop_reason == "first"
    lifecycle.finish(running, 0, None, None)  # exits cleanly after the request: cancelled
    assert running.status == "cancelled"


def test_failure_keeps_error_and_traceback() -> None:
    run = make("running")
    lifecycle.finish(run, 1, "RuntimeError: boom", "Traceback ...\nRuntimeError: boom")
    assert run.status == "failed" and run.error == "RuntimeError: boom"
    assert run.traceback_tail.endswith("RuntimeError: boom")
    silent = make("running")
    lifecycle.finish(silent, -9, None, None)
    assert silent.status == "failed" and silent.error == "training exited with code -9"


@pytest.mark.parametrize("status", sorted(FINAL))
def test_finished_runs_refuse_every_event(status: str) -> None:
    for event in (lambda r: lifecycle.request_cancel(r), lambda r: lifecycle.start(r, 1, "h"),
                  lambda r: lifecycle.finish(r, 0, None, None),
                  lambda r: lifecycle.finish(r, 1, "x", None), lambda r: lifecycle.fail(r, "x")):
        run = make(status)
        with pytest.raises(TransitionError):
            event(run)
        assert run.status == status


# -- random event sequences ----------------------------------------------------------------

EVENTS = st.one_of(
    st.tuples(st.just("start")),
    st.tuples(st.just("cancel")),
    st.tuples(st.just("finish"), st.sampled_from([0, 1, -9, 137])),
    st.tuples(st.just("fail")),
    st.tuples(st.just("to"), st.sampled_from(sorted(EXPECTED))),
    st.tuples(st.just("log")),  # the worker reports a training step (not a status change)
)


def expected_target(event: tuple, status: str, cancel_requested: bool,
                    logged: bool = True) -> str | None:
    """Where the event should take a run in ``status`` (None: it stays, with no error).
    A clean exit without a single logged step trained nothing anyone can see: failed."""
    kind = event[0]
    if kind == "start":
        return "running"
    if kind == "cancel":
        return "cancelled" if status == "queued" else None
    if kind == "finish":
        if cancel_requested:
            return "cancelled"
        return "succeeded" if event[1] == 0 and logged else "failed"
    if kind == "fail":
        return "failed"
    return event[1]


def apply(run: Run, event: tuple) -> None:
    kind = event[0]
    if kind == "start":
        lifecycle.start(run, pid=7, host="h")
    elif kind == "cancel":
        lifecycle.request_cancel(run)
    elif kind == "finish":
        lifecycle.finish(run, event[1], "boom" if event[1] else None, None)
    elif kind == "fail":
        lifecycle.fail(run, "broker down")
    elif kind == "log":
        run.current_step, run.last_step_at = run.current_step + 1, datetime.now(UTC)
    else:
        lifecycle.transition(run, Status(event[1]))


@given(start=st.sampled_from(["queued", "running", "imported"]),
       events=st.lists(EVENTS, max_size=12))
def test_random_event_sequences_never_reach_an_illegal_state(start: str, events: list) -> None:
    run = make(start)
    status, cancel_requested, was_running = start, False, start == "running"
    logged = False  # whether a training step was reported (ingest sets last_step_at)
    for event in events:
        before = run.status
        if event[0] == "log":
            apply(run, event)
            logged = True
            assert run.status == status
            continue
        target = expected_target(event, status, cancel_requested, logged)
        cancel_of_running = event[0] == "cancel" and status == "running"
        legal = cancel_of_running or (target is not None and target in EXPECTED[status])
        if legal:
            apply(run, event)
            if cancel_of_running:
                cancel_requested = True
            else:
                status = target
                was_running = was_running or status == "running"
            if event[:2] == ("finish", 0) and status == "failed":
                assert run.error == "training ended without logging a single step"
        else:
            with pytest.raises(TransitionError):
                apply(run, event)
        assert run.status == status, (before, event)
        if before in FINAL:
            assert run.status == before  # nothing brings a finished run back
        assert (run.finished_at is not None) is (status in FINAL and status != start)
        assert (run.started_at is not None) is (was_running and start != "running")
        assert (run.cancel_requested_at is not None) is cancel_requested
        assert lifecycle.is_live(run) is (status in LIVE)
