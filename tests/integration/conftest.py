"""Live stacks on both backends: embedded (SQLite + kombu's SQLite transport) and production
(PostgreSQL + Redis)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
import redis

from tests.conftest import PG_ADMIN
from tests.stack import Stack


def _pg_db() -> str:
    name = f"grpodeck_it_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


@pytest.fixture(scope="module", params=["embedded", "postgres-redis"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp(request.param)
    pg_name = None
    if request.param == "embedded":
        live = Stack(f"sqlite:///{workdir / 'grpodeck.db'}", f"sqla+sqlite:///{workdir / 'broker.db'}",
                     workdir)
    else:
        pg_name = _pg_db()
        redis.Redis(host="127.0.0.1", port=6379, db=9).flushdb()
        live = Stack(f"postgresql+psycopg://postgres@127.0.0.1:5432/{pg_name}",
                     "redis://127.0.0.1:6379/9", workdir)
    live.start()
    try:
        yield live
    finally:
        live.stop()
        if pg_name:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
