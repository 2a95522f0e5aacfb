"""MetricsReporter against a real HTTP receiver (and a dead port)."""

from __future__ import annotations

import json
import math
import socket
import threading
import time

from transformers import TrainerControl, TrainerState, TrainingArguments

from grpodeck.client import spool
from worker.run_client import RunClient
from worker.tasks import replay
from worker.training.reporting import MetricsReporter, encode_value, rows_from_logs


def _state(step: int) -> TrainerState:
    state = TrainerState()
    state.global_step = step
    return state


def _dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


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


def test_batches_rows_and_sends_token(receiver, tmp_path) -> None:
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    rep = MetricsReporter(receiver.url, 7, "s3cret", batch_rows=2, flush_seconds=3600)
    rep.on_log(args, _state(1), control, logs={"loss": 1.0})
    assert receiver.requests == []
    rep.on_log(args, _state(2), control, logs={"loss": 2.0})
    assert len(receiver.requests) == 1
    req = receiver.requests[0]
    assert req["path"] == "/api/runs/7/metrics"
    assert req["headers"]["Authorization"] == "Bearer s3cret"
    assert req["body"] == {"rows": [{"step": 1, "metrics": {"loss": 1.0}},
                                    {"step": 2, "metrics": {"loss": 2.0}}]}
    rep.on_log(args, _state(3), control, logs={"loss": 3.0})
    rep.on_train_end(args, _state(3), control)  # always flushes what is left
    assert receiver.rows[-1] == {"step": 3, "metrics": {"loss": 3.0}}
    assert not control.should_training_stop


def test_stop_answer_stops_training_even_from_a_heartbeat(receiver, tmp_path) -> None:
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    receiver.stop = True
    rep = MetricsReporter(receiver.url, 1, "t", flush_seconds=0)
    rep.on_step_end(args, _state(1), control)
    assert receiver.requests[0]["body"] == {"rows": []}  # heartbeat: empty batch
    assert control.should_training_stop and rep.stop_requested


def test_unreachable_server_keeps_rows_and_never_raises(tmp_path) -> None:
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    rep = MetricsReporter(_dead_url(), 1, "t", batch_rows=1, flush_seconds=0, attempts=2,
                          report_deadline=1)
    rep.on_log(args, _state(1), control, logs={"loss": 1.0})
    rep.on_step_end(args, _state(2), control)
    rep.on_log(args, _state(2), control, logs={"loss": 2.0})
    rep.on_train_end(args, _state(2), control)
    assert [r["step"] for r in rep._buffer] == [1, 2] and rep.failures >= 1
    assert not control.should_training_stop


def test_rows_buffered_during_an_outage_are_sent_later(receiver, tmp_path) -> None:
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    receiver.status = 503
    rep = MetricsReporter(receiver.url, 1, "t", batch_rows=1, flush_seconds=0, attempts=2)
    rep.on_log(args, _state(1), control, logs={"loss": 1.0})
    assert len(receiver.requests) == 2 and rep._buffer  # retried, then kept
    receiver.status = 200
    assert rep.flush(control, force=True)
    assert receiver.requests[-1]["body"]["rows"] == [{"step": 1, "metrics": {"loss": 1.0}}]
    assert rep._buffer == []


def test_the_end_of_training_waits_for_the_server_and_delivers_everything(receiver, tmp_path) -> None:
    """Bug 6: an outage at the end of a run used to lose the last rows after three tries."""
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    receiver.status = 503
    path = tmp_path / "metrics.jsonl"
    rep = MetricsReporter(receiver.url, 1, "t", batch_rows=1, flush_seconds=0, attempts=1,
                          spool_path=path, report_deadline=60)
    for step in (1, 2, 3):
        rep.on_log(args, _state(step), control, logs={"loss": float(step)})
    back = threading.Timer(4.0, lambda: setattr(receiver, "status", 200))
    back.start()
    started = time.monotonic()
    rep.on_train_end(args, _state(3), control)
    back.join()
    assert time.monotonic() - started < 60
    delivered = [r["step"] for r in receiver.rows if receiver.status == 200]
    assert rep._buffer == [] and {1, 2, 3} <= set(delivered)
    assert spool.acked(path) == 3 and spool.unacked(path) == []


def test_a_backlog_goes_out_in_bounded_posts(receiver, tmp_path) -> None:
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    rep = MetricsReporter(receiver.url, 1, "t", batch_rows=10_000, flush_seconds=3600)
    for step in range(1, 1201):
        rep.on_log(args, _state(step), control, logs={"loss": 1.0})
    assert rep.flush(force=True)
    sizes = [len(r["body"]["rows"]) for r in receiver.requests]
    assert sum(sizes) == 1200 and max(sizes) <= 500


def test_a_revoked_token_stops_training_and_sends_no_more(receiver, tmp_path) -> None:
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    receiver.status = 401
    rep = MetricsReporter(receiver.url, 1, "t", batch_rows=1, flush_seconds=0)
    rep.on_log(args, _state(1), control, logs={"loss": 1.0})
    assert control.should_training_stop and rep.run_over
    sent = len(receiver.requests)
    rep.on_train_end(args, _state(1), control)
    assert len(receiver.requests) == sent


def test_the_supervisor_replays_what_the_child_never_delivered(receiver, tmp_path) -> None:
    """Rows the child spooled but the server never acknowledged reach the server afterwards,
    once each; rows it did acknowledge are not sent again."""
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    path = tmp_path / "metrics.jsonl"
    rep = MetricsReporter(receiver.url, 9, "t", batch_rows=1, flush_seconds=0, spool_path=path)
    rep.on_log(args, _state(1), control, logs={"loss": 1.0})  # delivered and acknowledged
    dead = MetricsReporter(_dead_url(), 9, "t", batch_rows=1, flush_seconds=0, attempts=1,
                           spool_path=path, report_deadline=0.5)
    dead._acked = spool.acked(path)
    for step in (2, 3):
        dead.on_log(args, _state(step), control, logs={"loss": float(step)})
    dead.on_train_end(args, _state(3), control)
    with path.open("a") as fh:
        fh.write('{"step": 4, "metr')  # the child killed mid-write
    assert [r["step"] for r in spool.unacked(path)] == [2, 3]
    client = RunClient(receiver.url, 9, deadline=5)
    assert replay(client, path) == 2
    assert [r["step"] for r in receiver.rows] == [1, 2, 3]
    assert replay(client, path) == 0 and [r["step"] for r in receiver.rows] == [1, 2, 3]
    assert json.loads(path.read_text().splitlines()[0]) == {"step": 1, "metrics": {"loss": 1.0}}


def test_a_batch_outside_the_wire_format_is_dropped_without_a_post(receiver, tmp_path) -> None:
    """The reporter builds its body with the server's own schema (grpodeck.contract.wire): what
    the server would refuse (422) is dropped here, once, and later rows still go out."""
    args, control = TrainingArguments(output_dir=str(tmp_path), report_to="none"), TrainerControl()
    spool_path = tmp_path / "metrics.jsonl"
    rep = MetricsReporter(receiver.url, 7, "t", batch_rows=1, flush_seconds=3600,
                          spool_path=spool_path)
    rep.on_log(args, _state(3), control, logs={"x" * 1_001: 1.0})  # a name past the wire's limit
    assert receiver.requests == [] and rep._buffer == [] and rep.failures == 0
    assert spool.unacked(spool_path) == []  # refused for good: nothing for the replay either
    rep.on_log(args, _state(4), control, logs={"loss": 1.0})
    assert receiver.rows == [{"step": 4, "metrics": {"loss": 1.0}}]
    rep.close()
