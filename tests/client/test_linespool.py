"""The rollout spool's size bound, without a server: the oldest waiting lines are dropped and
counted (never silently), acknowledgements never move the prefix twice, the file stays bounded,
and ``finish``'s line says what was dropped."""

from __future__ import annotations

import json
from pathlib import Path

from grpodeck.client import linespool
from grpodeck.client.linespool import LineSpool
from grpodeck.client.run import undelivered_line
from grpodeck.client.sender import Sender


def line(step: int) -> dict[str, object]:
    return {"step": step, "groups": [], "pad": "x" * 80}  # ~110 bytes a line


def steps(spool: LineSpool) -> list[int]:
    return [json.loads(raw)["step"] for raw in spool.unsent(10_000).lines]


def test_past_the_bound_the_oldest_waiting_lines_are_dropped_and_counted(tmp_path: Path) -> None:
    spool = LineSpool(tmp_path / "r.jsonl", max_pending_bytes=1_000)
    spool.append([line(s) for s in range(30)])
    kept = steps(spool)
    assert kept == list(range(30 - len(kept), 30)) and 5 <= len(kept) <= 9  # newest kept
    assert spool.dropped == 30 - len(kept)
    assert spool.end - spool.offset <= 1_000
    reopened = LineSpool(tmp_path / "r.jsonl")  # the drop is on disk: a later sync agrees
    assert steps(reopened) == kept


def test_an_acknowledgement_after_a_drop_does_not_move_the_prefix_twice(tmp_path: Path) -> None:
    spool = LineSpool(tmp_path / "r.jsonl", max_pending_bytes=600)
    spool.append([line(s) for s in range(4)])
    in_flight = spool.unsent(2)  # steps 0, 1 posted ...
    spool.append([line(s) for s in range(4, 8)])  # ... while the bound drops them and more
    spool.ack(in_flight)
    assert steps(spool)[-1] == 7 and spool.pending() == len(steps(spool)) >= 4


def test_the_file_is_compacted_once_its_delivered_prefix_outweighs_what_waits(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(linespool, "COMPACT_BYTES", 500)
    spool = LineSpool(tmp_path / "r.jsonl", compact=True)
    spool.append([line(s) for s in range(10)])
    spool.ack(spool.unsent(8))
    assert steps(spool) == [8, 9] and spool.offset == 0
    assert (tmp_path / "r.jsonl").stat().st_size < 300
    assert steps(LineSpool(tmp_path / "r.jsonl")) == [8, 9]  # the count was reset with it


def test_finish_says_how_many_rollout_steps_the_bound_dropped(tmp_path: Path) -> None:
    sender = Sender(None, tmp_path / "metrics.jsonl", rollout_spool_bytes=2_000)
    for step in range(100):
        sender.put_rollouts(step, [{"index": 0, "prompt": "p", "completions": [
            {"text": "x" * 50}]}])
    sender._drain()
    text = undelivered_line(sender, None) or ""
    assert f"{sender.rollouts_dropped} rollout steps were dropped at the spool's bound" in text
    assert sender.rollouts_dropped > 80 and "rollout steps were not delivered" in text
