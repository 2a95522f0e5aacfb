"""Issue 55: stopping `grpodeck up` (SIGTERM from `docker stop` or systemd, Ctrl-C's SIGINT)
while its worker trained a run left the run ``running`` until the lost-run check of the next
start failed it, minutes later. Now `up` records it before it exits: a real `up`, a run that
trains for a long time, the stop signal, then the run's status read from the database."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import httpx
import pytest

from app.runs.interrupted import STOPPED
from tests.conftest import tiny_spec
from tests.test_up import Up, _start_up, _stop, _wait


def _recorded(up: Up, run_id: int) -> tuple[str, str | None]:
    """(status, error) of the run, as the database holds it."""
    with sqlite3.connect(up.workdir / "deck.db") as db:
        return db.execute("SELECT status, error FROM runs WHERE id = ?", (run_id,)).fetchone()


def _training(up: Up) -> int:
    """A run that trains for far longer than the test, once its worker has claimed it."""
    reply = httpx.post(f"{up.url}/api/runs", json=tiny_spec(name="long", max_steps=10_000),
                       timeout=30)
    assert reply.status_code == 201, reply.text
    run_id = int(reply.json()["id"])
    _wait(lambda: _recorded(up, run_id)[0] == "running", "the worker to claim the run", 180)
    return run_id


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stopping_up_mid_run_records_the_run_as_stopped_before_it_exits(
        tmp_path: Path, sig: signal.Signals) -> None:
    up = _start_up(tmp_path)
    try:
        _wait(lambda: up.heartbeat("worker"), "the worker's first heartbeat", 120)
        run_id = _training(up)
        up.proc.send_signal(sig)
        assert up.proc.wait(timeout=120) == 0, up.log()[-4000:]
        status, error = _recorded(up, run_id)
        assert (status, error) == ("failed", STOPPED), (status, error, up.log()[-3000:])
        assert f"run {run_id}: {STOPPED}" in up.log()
    finally:
        _stop(up)
