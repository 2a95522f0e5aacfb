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


GROWING_PAST_A_LIMIT = """
import json, resource, signal, sys
from pathlib import Path
from grpodeck.client.linespool import LineSpool
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
spool = LineSpool(Path(sys.argv[1]))
for step in range(100):
    spool.append([{"step": step, "groups": [], "pad": "x" * 80}])
first = spool.unsent(30)
spool.ack(first)
rest = spool.unsent(1_000)
print(json.dumps({"sent": [json.loads(x)["step"] for x in first.lines + rest.lines],
                  "pending": spool.pending(), "lost": spool.lost, "trouble": spool.trouble}))
"""


def test_a_file_the_os_stops_growing_moves_to_memory_and_loses_nothing(tmp_path: Path) -> None:
    """A real write failure without root or a full disk: the file size limit (EFBIG), in a
    child process. Issue 55: the append raised into the sender and ended it."""
    import subprocess
    import sys

    from app.core.config import ROOT

    done = subprocess.run([sys.executable, "-c", GROWING_PAST_A_LIMIT, str(tmp_path / "r.jsonl")],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["sent"] == list(range(100)) and got["pending"] == 70
    assert got["trouble"] == "File too large" and 0 < got["lost"] <= 70
    on_disk = LineSpool(tmp_path / "r.jsonl")  # the file holds whole lines only, in order
    assert steps(on_disk) == list(range(30, 100 - got["lost"]))
    assert "kept in memory" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_finish_says_rows_kept_only_in_memory_are_lost_not_to_sync() -> None:
    """No spool folder (``init`` could not create it) and no Deck: the line must not point at
    a sync that has nothing to deliver."""
    sender = Sender(None, None)
    sender.put_rows([{"step": s, "metrics": {"loss": 1.0}} for s in range(5)])
    sender._drain()
    text = undelivered_line(sender, None) or ""
    assert "5 rows and 0 rollout steps were not delivered" in text
    assert "kept in memory only (the spool could not be written: no spool folder)" in text
    assert "sync" not in text


def test_in_memory_the_oldest_waiting_lines_go_past_the_memory_bound(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With no file to write, memory is bounded too: the newest lines stay, the rest are
    counted as dropped (and named in finish's line), never silently."""
    monkeypatch.setattr(linespool, "MEMORY_BYTES", 1_000)
    spool = LineSpool(None)
    spool.append([line(s) for s in range(30)])
    kept = steps(spool)
    assert kept == list(range(30 - len(kept), 30)) and 5 <= len(kept) <= 9
    assert spool.dropped == 30 - len(kept) == 30 - spool.pending()
    assert spool.memory_size == sum(len(x) for x in spool.memory or []) <= 1_000
    spool.ack(spool.unsent(2))
    assert steps(spool) == kept[2:] and spool.lost == len(kept) - 2
