"""MetricsReporter (a thin TrainerCallback over grpodeck.client's Sender) against a real HTTP
receiver, a server that holds requests open, one that refuses, and a dead port.

Waits below are hang guards (generous, never a speed claim): the sender works on its own
thread, so a test waits for what the server saw, not for a call to finish."""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from transformers import TrainerControl, TrainerState, TrainingArguments

from grpodeck.client import spool
from tests.worker.conftest import Receiver, serve
from worker.run_client import RunClient
from worker.tasks import replay, replay_all
from worker.training.reporting import MetricsReporter, encode_value, rows_from_logs

GUARD = 30.0  # seconds before a wait is called a hang


def until(cond: Callable[[], Any], what: str, timeout: float = GUARD) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for: {what}"
        time.sleep(0.01)


def _state(step: int) -> TrainerState:
    state = TrainerState()
    state.global_step = step
    return state


def _free_port() -> int:
    with socket.socket() as s:  # a port nobody listens on (until a test serves on it)
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """A reporter as the trainer drives it: on_train_begin, then logs and step ends."""

    def __init__(self, url: str, tmp_path: Path, run_id: int = 1, **kwargs: Any) -> None:
        self.args = TrainingArguments(output_dir=str(tmp_path), report_to="none")
        self.control = TrainerControl()
        self.spool = tmp_path / "metrics.jsonl"
        kwargs.setdefault("system_seconds", 0)  # these count rows: no system/* samples among them
        self.rep = MetricsReporter(url, run_id, kwargs.pop("token", "t"), spool_path=self.spool,
                                   **kwargs)
        self.rep.on_train_begin(self.args, _state(0), self.control)

    def log(self, step: int, **logs: Any) -> None:
        self.rep.on_log(self.args, _state(step), self.control, logs=logs or {"loss": float(step)})

    def step_end(self, step: int) -> None:
        self.rep.on_step_end(self.args, _state(step), self.control)

    def end(self, step: int = 0) -> None:
        self.rep.on_train_end(self.args, _state(step), self.control)
        self.rep.close()


def _steps(receiver: Receiver) -> list[int]:
    return [r["step"] for r in receiver.rows]


def test_encode_value() -> None:
    assert encode_value(1) == 1.0 and encode_value(0.5) == 0.5
    assert encode_value(math.nan) == "nan"
    assert encode_value(math.inf) == "inf" and encode_value(-math.inf) == "-inf"
    assert encode_value(None) is None and encode_value("x") is None and encode_value(True) is None


def test_eval_logs_become_their_own_row() -> None:
    rows = rows_from_logs(4, {"loss": 1.0, "eval_reward": 0.5, "eval_loss": math.nan, "note": None})
    assert rows == [{"step": 4, "metrics": {"loss": 1.0}},
                    {"step": 4, "metrics": {"eval_reward": 0.5, "eval_loss": "nan"}}]
    assert rows_from_logs(1, {"note": None}) == []


def test_batches_rows_sends_the_token_and_spools_everything(receiver, tmp_path) -> None:
    run = Run(receiver.url, tmp_path, run_id=7, token="s3cret", batch_rows=2, flush_seconds=3600)
    until(lambda: receiver.requests, "the first heartbeat")
    assert receiver.requests[0]["body"] == {"rows": []}
    run.log(1)
    run.log(2)  # two rows wait: the sender posts them without waiting for the hour
    until(lambda: len(receiver.rows) == 2, "the batch of two")
    req = receiver.requests[-1]
    assert req["path"] == "/api/runs/7/metrics"
    assert req["headers"]["Authorization"] == "Bearer s3cret"
    assert req["body"] == {"rows": [{"step": 1, "metrics": {"loss": 1.0}},
                                    {"step": 2, "metrics": {"loss": 2.0}}]}
    run.log(3)
    run.end(3)  # always delivers what is left
    assert _steps(receiver) == [1, 2, 3] and not run.control.should_training_stop
    assert [json.loads(x) for x in run.spool.read_text().splitlines()] == receiver.rows
    assert spool.acked(run.spool) == 3 and spool.unacked(run.spool) == []


def test_on_log_and_on_step_end_return_while_the_server_holds_the_request(
        receiver, tmp_path) -> None:
    """Issue 12: the training thread only enqueues. The server keeps every request open until
    the test lets it answer, which it does only after the training-thread calls returned."""
    receiver.hold = threading.Event()
    run = Run(receiver.url, tmp_path, batch_rows=1, flush_seconds=0.1, timeout=3600)
    until(lambda: receiver.holding == 1, "the sender's post held open by the server")
    returned = threading.Event()

    def training_thread() -> None:
        for step in range(1, 6):
            run.log(step)
            run.step_end(step)
        returned.set()

    threading.Thread(target=training_thread, daemon=True).start()
    try:
        assert returned.wait(GUARD), "on_log/on_step_end waited on the server"
        assert receiver.holding == 1 and receiver.rows == []  # still held, nothing answered
    finally:
        receiver.hold.set()
    until(lambda: _steps(receiver) == [1, 2, 3, 4, 5], "the rows, once the server answers")
    run.end(5)


def test_close_does_not_wait_past_its_deadline_on_a_hung_server(receiver, tmp_path) -> None:
    receiver.hold = threading.Event()
    run = Run(receiver.url, tmp_path, batch_rows=1, timeout=3600, report_deadline=0.2)
    run.log(1)
    until(lambda: receiver.holding >= 1, "a post held open")
    closed = threading.Event()
    threading.Thread(target=lambda: (run.end(1), closed.set()), daemon=True).start()
    try:
        assert closed.wait(GUARD), "on_train_end waited for the hung server past its deadline"
        assert [r["step"] for r in spool.unacked(run.spool)] == [1]  # left for the replay
    finally:
        receiver.hold.set()


def test_a_refused_batch_does_not_stall_later_rows(receiver, tmp_path) -> None:
    """A 422 is final: that batch is dropped (acknowledged) with a warning, not retried
    forever in front of every later row."""
    receiver.refuse = lambda body: any(r["step"] == 1 for r in body["rows"])
    run = Run(receiver.url, tmp_path, batch_rows=1, flush_seconds=0.1, report_deadline=2)
    run.log(1)
    until(lambda: 1 in _steps(receiver), "the refused post")
    run.log(2)
    run.log(3)
    until(lambda: [r["step"] for r in receiver.delivered] == [2, 3],
          "the rows after the refused one, taken by the server")
    run.end(3)
    assert _steps(receiver).count(1) == 1  # refused once, never resent
    assert spool.acked(run.spool) == 3 and spool.unacked(run.spool) == []  # nothing to replay


def test_a_row_outside_the_wire_format_is_dropped_without_a_post(receiver, tmp_path) -> None:
    """The contract's own models (grpodeck.contract.wire) refuse it here, row by row: the good
    rows of the same batch still go out."""
    run = Run(receiver.url, tmp_path, batch_rows=2, flush_seconds=3600)
    run.log(3, **{"x" * 1_001: 1.0})  # a name past the wire's limit
    run.log(4)
    until(lambda: receiver.rows, "the good row")
    run.end(4)
    assert receiver.rows == [{"step": 4, "metrics": {"loss": 4.0}}]
    assert spool.unacked(run.spool) == []  # refused for good: nothing for the replay either


def test_a_stop_in_the_reply_stops_training_even_from_a_heartbeat(receiver, tmp_path) -> None:
    receiver.stop = True
    run = Run(receiver.url, tmp_path, flush_seconds=0.1)
    until(lambda: run.rep.stop_requested, "the reply's stop")
    assert receiver.requests[0]["body"] == {"rows": []}  # a heartbeat: empty batch
    run.step_end(1)
    assert run.control.should_training_stop
    other = TrainerControl()
    run.rep.on_log(run.args, _state(1), other, logs={"loss": 1.0})
    assert other.should_training_stop
    run.end(1)


def test_rows_survive_a_dead_server_and_all_arrive_once_it_is_up(tmp_path) -> None:
    port = _free_port()
    run = Run(f"http://127.0.0.1:{port}", tmp_path, batch_rows=1, flush_seconds=0.1)
    for step in range(1, 6):
        run.log(step)
        run.step_end(step)
    until(lambda: run.rep._sender.state.failures >= 2, "failed attempts on the dead port")
    assert not run.control.should_training_stop  # an unreachable server is not a stop
    with serve(port) as receiver:
        until(lambda: spool.acked(run.spool) == 5, "the backlog delivered")
        run.log(6)
        run.end(6)
        assert _steps(receiver) == [1, 2, 3, 4, 5, 6]
    assert spool.unacked(run.spool) == []


def test_what_the_child_never_delivered_is_replayed_by_the_supervisor(receiver, tmp_path) -> None:
    """Rows spooled but never acknowledged (the server down until the child exits) reach the
    server afterwards, once each; rows it did acknowledge are not sent again."""
    first = Run(receiver.url, tmp_path, run_id=9, batch_rows=1)
    first.log(1)
    first.end(1)  # delivered and acknowledged
    dead = Run(f"http://127.0.0.1:{_free_port()}", tmp_path, run_id=9, batch_rows=1,
               report_deadline=0.3)
    for step in (2, 3):
        dead.log(step)
    dead.end(3)
    with dead.spool.open("a") as fh:
        fh.write('{"step": 4, "metr')  # the child killed mid-write
    assert [r["step"] for r in spool.unacked(dead.spool)] == [2, 3]
    client = RunClient(receiver.url, 9, deadline=5)
    assert replay(client, dead.spool) == 2
    assert _steps(receiver) == [1, 2, 3]
    assert replay(client, dead.spool) == 0 and _steps(receiver) == [1, 2, 3]


def test_captured_rollouts_the_child_never_delivered_are_replayed_too(receiver, tmp_path) -> None:
    """The rollout spool (``rollouts.jsonl`` next to the rows) is replayed like the rows: every
    captured step once, none sent twice by a second replay."""
    dead = Run(f"http://127.0.0.1:{_free_port()}", tmp_path, run_id=9, batch_rows=1,
               report_deadline=0.3)
    for step in range(1, 24):
        dead.rep.add_rollouts(step, [{"index": 0, "prompt": f"p{step}",
                                      "completions": [{"text": "a", "rewards": {"r": 0.5}}]}])
    dead.log(23)
    dead.end(23)
    client = RunClient(receiver.url, 9, deadline=5)
    assert replay_all(client, tmp_path) == 1 + 23
    sent = [s["step"] for r in receiver.requests for s in r["body"].get("rollouts", [])]
    assert sent == list(range(1, 24)) and _steps(receiver) == [23]
    assert replay_all(client, tmp_path) == 0
    assert len([s for r in receiver.requests for s in r["body"].get("rollouts", [])]) == 23


def test_a_reused_spool_sends_only_what_was_never_acknowledged(receiver, tmp_path) -> None:
    """A spool left by an earlier child (a retried run in the same output dir): its acknowledged
    prefix is not sent again, the rest is, and a torn last line costs no new row."""
    path = tmp_path / "metrics.jsonl"
    spool.append(path, [{"step": 1, "metrics": {"loss": 1.0}}, {"step": 2, "metrics": {"loss": 2.0}}])
    spool.mark_acked(path, 1)
    with path.open("a") as fh:
        fh.write('{"step": 3, "metr')  # killed mid-write
    run = Run(receiver.url, tmp_path, batch_rows=1)
    run.log(4)
    run.end(4)
    assert _steps(receiver) == [2, 4]
    assert spool.unacked(path) == []


def test_a_backlog_goes_out_in_bounded_posts(receiver, tmp_path) -> None:
    run = Run(receiver.url, tmp_path, batch_rows=10_000, flush_seconds=3600)
    for step in range(1, 1201):
        run.log(step)
    run.end(1200)
    sizes = [len(r["body"]["rows"]) for r in receiver.requests]
    assert sum(sizes) == 1200 and max(sizes) <= 500


def test_a_revoked_token_stops_training_and_sends_no_more(receiver, tmp_path) -> None:
    run = Run(receiver.url, tmp_path, batch_rows=2, flush_seconds=3600)
    until(lambda: receiver.requests, "the first heartbeat")
    receiver.status = 401
    run.log(1)
    run.log(2)
    until(lambda: run.rep.run_over, "the 401")
    run.step_end(2)
    assert run.control.should_training_stop
    sent = len(receiver.requests)
    run.log(3)
    run.log(4)
    run.end(4)
    assert len(receiver.requests) == sent
    assert spool.unacked(run.spool) == []  # over on the server: nothing for the replay


def test_an_idle_sender_sleeps(receiver, tmp_path) -> None:
    """Between heartbeats the thread blocks on its queue: a second of idling costs next to no
    CPU (a polling or spinning loop burns a good part of it)."""
    run = Run(receiver.url, tmp_path, flush_seconds=3600)
    until(lambda: receiver.requests, "the first heartbeat")
    thread = next(t for t in psutil.Process().threads() if t.id == run.rep._sender.native_id)
    before = thread.user_time + thread.system_time
    time.sleep(1.0)
    thread = next(t for t in psutil.Process().threads() if t.id == run.rep._sender.native_id)
    assert thread.user_time + thread.system_time - before < 0.05
    run.end()
