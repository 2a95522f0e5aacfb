"""Live stacks on both backends: embedded (SQLite + kombu's SQLite transport) and production
(PostgreSQL + Redis)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import redis

from tests.conftest import PG_ADMIN
from tests.stack import PrivateRedis, Stack


def _pg_db() -> str:
    name = f"grpodeck_it_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


@contextmanager
def live_stack(kind: str, workdir: Path, extra_env: dict[str, str] | None = None,
               private_redis: bool = False) -> Iterator[Stack]:
    """A started stack of ``kind``; everything it started is stopped and dropped afterwards.
    ``private_redis``: a redis-server of the stack's own instead of db 9 of the shared one."""
    pg_name, broker = None, None
    try:
        if kind == "embedded":
            live = Stack(f"sqlite:///{workdir / 'grpodeck.db'}",
                         f"sqla+sqlite:///{workdir / 'broker.db'}", workdir,
                         extra_env=extra_env or {})
        else:
            pg_name = _pg_db()
            if private_redis:
                broker = PrivateRedis(workdir / "redis").start()
                broker_url = broker.url
            else:
                redis.Redis(host="127.0.0.1", port=6379, db=9).flushdb()
                broker_url = "redis://127.0.0.1:6379/9"
            live = Stack(f"postgresql+psycopg://postgres@127.0.0.1:5432/{pg_name}", broker_url,
                         workdir, extra_env=extra_env or {})
        live.start()
        try:
            yield live
        finally:
            live.stop()
    finally:
        if broker is not None:
            broker.stop()
        if pg_name:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')


@pytest.fixture(scope="module", params=["embedded", "postgres-redis"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    with live_stack(request.param, tmp_path_factory.mktemp(request.param)) as live:
        yield live
