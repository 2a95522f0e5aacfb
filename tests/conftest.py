"""Shared fixtures: real databases (SQLite and PostgreSQL), migrated with Alembic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from alembic import command
from alembic.config import Config

from app.core import config as config_module
from app.core import db as db_module
from app.core.config import ROOT

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def migrate(url: str) -> None:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", url)
    command.upgrade(cfg, "head")


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (or one stack), dropped afterwards."""
    name = f"grpodeck_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'grpodeck.db'}"
    return request.getfixturevalue("pg_database")


@pytest.fixture
def app_db(database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Point the app's settings at a migrated database for in-process tests."""
    migrate(database_url)
    monkeypatch.setenv("GRPODECK_DATABASE_URL", database_url)
    monkeypatch.setenv("GRPODECK_BROKER_URL", f"sqla+sqlite:///{tmp_path / 'broker.db'}")
    for cached in (config_module.get_settings, db_module.get_engine, db_module.get_sessionmaker):
        cached.cache_clear()
    yield database_url
    db_module.get_engine().dispose()
    for cached in (config_module.get_settings, db_module.get_engine, db_module.get_sessionmaker):
        cached.cache_clear()
