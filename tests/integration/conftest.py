"""Live stacks on both backends: embedded (SQLite + kombu's SQLite transport) and production
(PostgreSQL + Redis). One stack per backend for the whole session: starting one costs a
migration, a uvicorn and a Celery worker, and every test waits for its own runs to end.
Stacks share Redis db 9 but each has its own queue (tests/stack.py), so nothing here flushes
it: that would drop the tasks of a stack another test session is running."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.conftest import postgres_database
from tests.stack import Stack


@pytest.fixture(scope="session", params=["embedded", "postgres-redis"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp(request.param)
    with ExitStack() as cleanup:
        if request.param == "embedded":
            live = Stack(f"sqlite:///{workdir / 'grpodeck.db'}",
                         f"sqla+sqlite:///{workdir / 'broker.db'}", workdir)
        else:
            database = cleanup.enter_context(postgres_database("grpodeck_it"))
            live = Stack(database, "redis://127.0.0.1:6379/9", workdir)
        cleanup.callback(live.stop)  # registered first: runs even when start() fails half-way
        yield live.start()
