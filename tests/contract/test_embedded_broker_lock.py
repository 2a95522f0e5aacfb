"""kombu's SQLAlchemy transport creates a queue with a get-or-create that is safe within one
process only: processes declaring a new queue at once on the embedded broker failed with
IntegrityError or "table already exists" (seen: a worker starting while a run was sent kept
the run queued). Each end declares the queue under ``embedded_broker_lock``; this starts
eight senders on a fresh broker at the same instant, on five fresh brokers."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from pathlib import Path

TRIALS, SENDERS = 5, 8


def _send(urls: list[str], barrier, answers) -> None:  # type: ignore[no-untyped-def]
    """One sender process: for each fresh broker, wait for the other senders, then declare."""
    from app.core.broker import sender

    for url in urls:
        barrier.wait()
        try:
            sender(url, "race")
            answers.put("ok")
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            answers.put(f"{type(exc).__name__}: {exc}"[:200])


def race(target: Callable[..., None], tmp_path: Path, prefix: str) -> list[str]:
    """What ``target`` answered in each of SENDERS spawned processes for each of TRIALS fresh
    brokers, the processes released together by a barrier before each broker."""
    context = multiprocessing.get_context("spawn")
    urls = [f"sqla+sqlite:///{tmp_path / f'{prefix}{trial}.db'}" for trial in range(TRIALS)]
    barrier, answers = context.Barrier(SENDERS), context.Queue()
    processes = [context.Process(target=target, args=(urls, barrier, answers))
                 for _ in range(SENDERS)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    return [answers.get(timeout=5) for _ in range(TRIALS * SENDERS)]


def test_processes_declaring_one_new_queue_at_once_all_succeed(tmp_path: Path) -> None:
    """The same eight processes race on five fresh brokers (a process per sender per broker
    spent 40 interpreter starts on the same race)."""
    assert race(_send, tmp_path, "broker") == ["ok"] * TRIALS * SENDERS


def _send_dry_runs(urls: list[str], barrier, answers) -> None:  # type: ignore[no-untyped-def]
    """One web process sending a dry run to each fresh broker, all at the same instant."""
    import os

    from app.core.config import get_settings
    from app.dryruns.sender import send

    for url in urls:
        os.environ["GRPODECK_BROKER_URL"] = url
        get_settings.cache_clear()
        barrier.wait()
        try:
            send(1, {}, "ticket", 2)
            answers.put("ok")
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            answers.put(f"{type(exc).__name__}: {exc}"[:200])


def test_dry_runs_sent_at_once_to_a_new_queue_all_arrive(tmp_path: Path) -> None:
    """A dry run sent while a worker started up (or another process sent) failed with
    "UNIQUE constraint failed: kombu_queue.name" (CI): its client skipped the locked
    declaration. Dry runs now go through the runs' client (``app.core.broker``)."""
    assert race(_send_dry_runs, tmp_path, "dry") == ["ok"] * TRIALS * SENDERS
