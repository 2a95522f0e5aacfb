"""Status changes follow the table; finished runs can never come back to life."""

from __future__ import annotations

import pytest

from app.runs import lifecycle
from app.runs.lifecycle import ALLOWED, Status, TransitionError
from app.runs.models import Run


def make(status: Status) -> Run:
    return Run(id=1, name="r", spec={}, status=status, max_steps=10, current_step=0)


@pytest.mark.parametrize("start", list(Status))
@pytest.mark.parametrize("target", list(Status))
def test_every_pair_follows_the_table(start: Status, target: Status) -> None:
    run = make(start)
    if target in ALLOWED[start]:
        lifecycle.transition(run, target)
        assert run.status == target
    else:
        with pytest.raises(TransitionError):
            lifecycle.transition(run, target)
        assert run.status == start


def test_terminal_states_have_timestamps() -> None:
    run = make(Status.QUEUED)
    lifecycle.start(run, pid=1, host="h")
    assert run.started_at is not None and run.worker_pid == 1
    run.last_step_at = run.started_at
    lifecycle.finish(run, 0, None, None)
    assert run.status == Status.SUCCEEDED and run.finished_at is not None


def test_a_run_that_logged_no_step_is_not_a_success() -> None:
    run = make(Status.QUEUED)
    lifecycle.start(run, pid=1, host="h")
    lifecycle.finish(run, 0, None, None)
    assert run.status == Status.FAILED and "without logging a single step" in run.error


def test_cancel_queued_is_immediate_and_running_is_a_request() -> None:
    queued = make(Status.QUEUED)
    lifecycle.request_cancel(queued)
    assert queued.status == Status.CANCELLED
    running = make(Status.RUNNING)
    lifecycle.request_cancel(running)
    assert running.status == Status.RUNNING and running.cancel_requested_at is not None
    lifecycle.finish(running, 0, None, None)
    assert running.status == Status.CANCELLED


def test_failure_keeps_error_and_traceback() -> None:
    run = make(Status.RUNNING)
    lifecycle.finish(run, 1, "RuntimeError: boom", "Traceback ...\nRuntimeError: boom")
    assert run.status == Status.FAILED and run.error == "RuntimeError: boom"


def test_cancel_of_finished_run_is_refused() -> None:
    with pytest.raises(TransitionError):
        lifecycle.request_cancel(make(Status.SUCCEEDED))
