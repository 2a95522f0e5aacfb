"""Live stacks on both backends: embedded (SQLite + kombu's SQLite transport) and production
(PostgreSQL + Redis). One stack per backend for the whole session: starting one costs a
migration, a uvicorn and a Celery worker, and every test waits for its own runs to end.
Stacks share Redis db 9 but each has its own queue (tests/stack.py), so nothing here flushes
it: that would drop the tasks of a stack another test session is running."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.conftest import postgres_database
from tests.stack import PrivateRedis, Stack


@contextmanager
def live_stack(kind: str, workdir: Path, extra_env: dict[str, str] | None = None,
               private_redis: bool = False, scheduler: bool = False,
               worker_concurrency: int | None = 1) -> Iterator[Stack]:
    """A started stack of ``kind``; everything it started is stopped and dropped afterwards,
    also when it fails half-way through starting. ``scheduler``: also run `grpodeck scheduler`
    (the lost-run check and the alert sender live there). ``private_redis``: a redis-server of the
    stack's own (for drills that restart it) instead of db 9 of the shared one (each stack has
    its own queue there, so stacks never take each other's tasks). ``worker_concurrency``: the
    worker's ``--concurrency`` (None: left to the worker, one per device slot).

    A stack with its own broker visibility timeout always gets a private Redis: kombu's Redis
    consumers restore the unacknowledged tasks of *every* queue on their db once those are older
    than their own timeout, so a 20 s stack on the shared db re-delivered runs that other
    stacks' workers were still training (seen in CI as a device-slot test's run claimed twice)."""
    private_redis = needs_own_redis(private_redis, extra_env)
    with ExitStack() as cleanup:
        if kind == "embedded":
            live = Stack(f"sqlite:///{workdir / 'grpodeck.db'}",
                         f"sqla+sqlite:///{workdir / 'broker.db'}", workdir,
                         extra_env=extra_env or {}, scheduler=scheduler,
                         worker_concurrency=worker_concurrency)
        else:
            database = cleanup.enter_context(postgres_database("grpodeck_it"))
            broker_url = "redis://127.0.0.1:6379/9"
            if private_redis:
                broker = PrivateRedis(workdir / "redis").start()
                cleanup.callback(broker.stop)
                broker_url = broker.url
            live = Stack(database, broker_url, workdir, extra_env=extra_env or {},
                         scheduler=scheduler, worker_concurrency=worker_concurrency)
        cleanup.callback(live.stop)  # registered before start: runs even when start() fails
        yield live.start()


def needs_own_redis(asked: bool, extra_env: dict[str, str] | None) -> bool:
    """Whether a stack must have a redis-server of its own: asked for, or a visibility timeout
    of its own (see ``live_stack``)."""
    return asked or "GRPODECK_BROKER_VISIBILITY_SECONDS" in (extra_env or {})


@pytest.fixture(scope="session", params=["embedded", "postgres-redis"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    with live_stack(request.param, tmp_path_factory.mktemp(request.param)) as live:
        yield live
