"""Eight uploads at once never store more than the quota (issue 55: eight parallel uploads to
one run stored 163 % of its quota). Real HTTP against a uvicorn serving the app in this process,
on SQLite and PostgreSQL. Each upload that was let in is held, once its body is on disk, until
every other one was let in too or answered: the uploads overlap, whatever the machine's speed,
and the only thing the test waits on is that recorded state."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.artifacts import storage
from app.artifacts.models import Artifact, ArtifactReservation
from app.core import config as config_module
from app.core.db import get_sessionmaker
from app.runs.models import Run
from tests.app.conftest import running_run
from tests.app.test_artifact_archives import HOSTILE
from tests.app.test_artifacts import put, stored_files
from tests.app.test_auth import make_user
from tests.served import served_app

UPLOADS = 8
SIZE = 300_000
QUOTA = 1_000_000  # room for three uploads, not four
HOLD_S = 60  # a guard against a hang, never a pause: the hold ends when all have arrived


class Gate:
    """Counts uploads that streamed in (server side) and uploads answered (client side); a
    streamed upload waits until the two add up to every upload."""

    def __init__(self, total: int) -> None:
        self.total, self.arrived = total, 0
        self.done = threading.Condition()

    def arrive(self) -> None:
        with self.done:
            self.arrived += 1
            self.done.notify_all()
            if not self.done.wait_for(lambda: self.arrived >= self.total, timeout=HOLD_S):
                raise TimeoutError("the uploads never all arrived")


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Gate:
    """``storage.receive`` held after the body is on disk (where the quota was checked once
    and is about to be checked again), until every upload arrived or was answered."""
    held = Gate(UPLOADS)
    receive = storage.receive

    async def holding(*args: Any, **kwargs: Any) -> storage.Received:
        received = await receive(*args, **kwargs)
        await anyio.to_thread.run_sync(held.arrive)
        return received

    monkeypatch.setattr(storage, "receive", holding)
    return held


@pytest.fixture
def quotas(app_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A run quota and a user quota of ``QUOTA`` bytes each."""
    monkeypatch.setenv("GRPODECK_ARTIFACT_RUN_QUOTA_BYTES", str(QUOTA))
    monkeypatch.setenv("GRPODECK_ARTIFACT_USER_QUOTA_BYTES", str(QUOTA))
    config_module.get_settings.cache_clear()
    yield
    config_module.get_settings.cache_clear()


@pytest.fixture
def server(quotas: None) -> Iterator[str]:
    """The app behind a real uvicorn (``tests.served``)."""
    with served_app(64) as url:
        yield url


def _upload_all(url: str, targets: list[tuple[int, dict[str, str]]], gate: Gate) -> list[int]:
    """Every upload at once, each from its own thread; the status codes."""
    def one(i: int) -> int:
        run_id, headers = targets[i % len(targets)]
        try:
            with httpx.Client(base_url=url, timeout=HOLD_S * 2) as client:
                return client.post(f"/api/runs/{run_id}/artifacts", headers=headers,
                                   params={"name": f"part-{i}.bin"},
                                   content=bytes([i]) * SIZE).status_code
        finally:
            with gate.done:  # answered: the held uploads no longer wait for this one
                gate.arrived += 1
                gate.done.notify_all()

    with ThreadPoolExecutor(UPLOADS) as pool:
        return list(pool.map(one, range(UPLOADS)))


def _stored(where: Callable[[Any], Any]) -> tuple[int, int]:
    with get_sessionmaker()() as db:
        return (db.scalar(where(select(func.coalesce(func.sum(Artifact.size), 0)))) or 0,
                db.scalar(where(select(func.count(Artifact.id)))) or 0)


def _claimed(client: TestClient, runs: int, owner: int | None) -> list[tuple[int, dict[str, str]]]:
    targets = [running_run(client) for _ in range(runs)]
    with get_sessionmaker()() as db:
        for run_id, _ in targets:
            db.get(Run, run_id).created_by_id = owner  # type: ignore[union-attr]
        db.commit()
    return targets


@pytest.mark.parametrize("quota", ["run", "user"])
def test_parallel_uploads_never_store_more_than_the_quota(
        server: str, gate: Gate, client: TestClient, tmp_path: Path, quota: str) -> None:
    owner = make_user("quota@example.com") if quota == "user" else None
    # run: eight uploads to one run; user: to four runs of one owner (each run's own quota
    # leaves room for all of its two)
    targets = _claimed(client, 1 if quota == "run" else 4, owner)
    codes = _upload_all(server, targets, gate)
    size, count = _stored(lambda q: q.join(Run, Run.id == Artifact.run_id))
    assert size <= QUOTA, f"{size} bytes stored ({size / QUOTA:.0%} of the quota), {codes}"
    assert sorted(codes) == [201] * 3 + [413] * 5, codes
    assert count == 3 and len(stored_files(tmp_path)) == 3  # no partial or refused file left


def _reservations() -> int:
    with get_sessionmaker()() as db:
        return db.scalar(select(func.count(ArtifactReservation.id))) or 0


def _hold(run_id: int, size: int, expires_in: timedelta) -> None:
    """A reservation as an upload in progress (or a server that died mid-upload) left it."""
    with get_sessionmaker()() as db:
        db.add(ArtifactReservation(run_id=run_id, size=size,
                                   expires_at=datetime.now(UTC) + expires_in))
        db.commit()


def _chunks(body: bytes) -> Iterator[bytes]:
    yield body  # no Content-Length: the upload reserves all the room left


def test_a_refused_or_failed_upload_gives_its_bytes_back(quotas: None,
                                                         client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert put(client, run_id, headers, HOSTILE, "ckpt.tar").status_code == 422
    longer = client.post(f"/api/runs/{run_id}/artifacts", params={"name": "a.bin"},
                         content=b"x" * 100, headers={**headers, "Content-Length": "10"})
    assert longer.status_code in (400, 413), longer.text  # refused, by the server or h11
    over = client.post(f"/api/runs/{run_id}/artifacts", params={"name": "b.bin"},
                       content=_chunks(b"x" * (QUOTA + 1)), headers=headers)
    assert over.status_code == 413 and "GRPODECK_ARTIFACT_RUN_QUOTA_BYTES" in over.text
    assert _reservations() == 0
    whole = client.post(f"/api/runs/{run_id}/artifacts", params={"name": "c.bin"},
                        content=_chunks(b"x" * QUOTA), headers=headers)
    assert whole.status_code == 201, whole.text
    assert _reservations() == 0


def test_an_upload_in_progress_holds_its_bytes_a_dead_one_does_not(
        quotas: None, client: TestClient) -> None:
    run_id, headers = running_run(client)
    _hold(run_id, QUOTA - 100, timedelta(hours=1))
    busy = put(client, run_id, headers, b"x" * 200, "a.bin")
    assert busy.status_code == 413, busy.text
    assert f"uploads in progress hold {QUOTA - 100} more" in busy.json()["detail"]
    assert put(client, run_id, headers, b"x" * 100, "a.bin").status_code == 201
    other_id, other_headers = running_run(client)
    _hold(other_id, QUOTA, -timedelta(seconds=1))  # its server died: expired
    assert put(client, other_id, other_headers, b"x" * QUOTA, "b.bin").status_code == 201
