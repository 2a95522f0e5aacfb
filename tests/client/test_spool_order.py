"""The spool keeps a run's step order even when a fast loop overflows the sender's queue: the
training thread then spools on its own thread, and what was still queued must go first (issue
31: rows spooled out of order left half of a 20k-step run out of its live diagnosis)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from grpodeck.client.sender import Sender, Target


def _closed_port() -> int:
    """A loopback port nothing listens on: every post fails, rows stay in the spool."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_queue_overflow_keeps_the_spool_in_step_order(tmp_path: Path) -> None:
    spool = tmp_path / "rows.jsonl"
    sender = Sender(Target(f"http://127.0.0.1:{_closed_port()}", 1, "t"), spool,
                    flush_seconds=0.1, queue_size=8, timeout=0.2)
    sender.start()
    for step in range(1, 20_001):  # as fast as a loop can call log()
        sender.put_rows([{"step": step, "metrics": {"reward": step / 20_000}}])
    sender.close(deadline=0.5)
    steps = [json.loads(line)["step"] for line in spool.read_bytes().splitlines()]
    assert len(steps) == 20_000
    assert steps == sorted(steps), "rows were spooled out of step order"


def test_a_queue_overflow_keeps_the_rollout_spool_in_step_order(tmp_path: Path) -> None:
    spool, rollouts = tmp_path / "rows.jsonl", tmp_path / "rollouts.jsonl"
    sender = Sender(Target(f"http://127.0.0.1:{_closed_port()}", 1, "t"), spool,
                    flush_seconds=0.1, queue_size=8, timeout=0.2, rollout_path=rollouts)
    sender.start()
    group = [{"index": 0, "prompt": "p", "completions": [{"text": "a", "rewards": {"r": 1.0}}]}]
    for step in range(1, 5_001):
        sender.put_rollouts(step, group)
    sender.close(deadline=0.5)
    steps = [json.loads(line)["step"] for line in rollouts.read_bytes().splitlines()]
    assert len(steps) == 5_000
    assert steps == sorted(steps), "rollouts were spooled out of step order"
