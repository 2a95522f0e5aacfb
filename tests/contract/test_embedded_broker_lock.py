"""kombu's SQLAlchemy transport creates a queue with a get-or-create that is safe within one
process only: processes declaring a new queue at once on the embedded broker failed with
IntegrityError or "table already exists" (seen: a worker starting while a run was sent kept
the run queued). Each end declares the queue under ``embedded_broker_lock``; this starts
eight senders on a fresh broker at the same instant, five times over."""

from __future__ import annotations

import multiprocessing
from pathlib import Path


def _send(url: str, barrier, answers) -> None:  # type: ignore[no-untyped-def]
    from app.launch.launcher import sender

    barrier.wait()
    try:
        sender(url, "race")
        answers.put("ok")
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        answers.put(f"{type(exc).__name__}: {exc}"[:200])


def test_processes_declaring_one_new_queue_at_once_all_succeed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    for trial in range(5):
        url = f"sqla+sqlite:///{tmp_path / f'broker{trial}.db'}"
        barrier, answers = context.Barrier(8), context.Queue()
        processes = [context.Process(target=_send, args=(url, barrier, answers))
                     for _ in range(8)]
        for p in processes:
            p.start()
        for p in processes:
            p.join(timeout=120)
        assert [answers.get(timeout=5) for _ in processes] == ["ok"] * 8
