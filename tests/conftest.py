"""Shared fixtures, defined once: real databases (SQLite and PostgreSQL, migrated with Alembic),
the tiny run spec every training test uses, and trainer-state builders.

In-process app tests run on both backends by default, because storage is where SQLite and
PostgreSQL differ. A test whose subject is not storage (pure logic, validation that stores
nothing, template rendering of what another test already stored on both) is marked
``@pytest.mark.one_backend`` and runs once, on SQLite.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from hypothesis import settings

from app.core import config as config_module
from app.core import db as db_module
from app.core.config import ROOT
from tests.live_marker import is_live
from tests.scheduling import (
    forget_groups,
    make_groups_folder,
    make_scheduler,
    tell_worker,
    write_groups,
)

# A report holding a lone surrogate must not end the run (tests/report_text.py).
pytest_plugins = ["tests.report_text"]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
# The tests assert findings batch by batch, so the detectors run on every batch here (servers
# the tests start inherit this); tests/app/test_perf_ingest.py covers the production rate bound.
os.environ.setdefault("GRPODECK_DIAGNOSTICS_MIN_INTERVAL_SECONDS", "0")
# The test deployment registers the tests' own example as its one custom reward (servers the
# tests start inherit it); anything else named by a ``custom`` reward is refused.
os.environ.setdefault("GRPODECK_CUSTOM_REWARDS", "tests.rewards.custom_reward:shout")
# Argon2id at its minimum cost (servers the tests start inherit it): at the recommended cost one
# hash is ~0.15 s of CPU, and the suite signs accounts in by the hundred; tests/app/test_passwords.py
# checks that the product's default is pwdlib's recommended cost and that hashes move between costs.
os.environ.setdefault("GRPODECK_ARGON2_TIME_COST", "1")
os.environ.setdefault("GRPODECK_ARGON2_MEMORY_KIB", "8")
os.environ.setdefault("GRPODECK_ARGON2_PARALLELISM", "1")
# One torch (OpenMP) thread per test process: `make test` runs two xdist workers on two cores, so
# two threads each had idle threads spin-waiting on cores the other worker needs (the training
# tests of tests/worker: 84 -> 70 CPU-s, 48 -> 41 s). Trainings and servers the tests start
# inherit it; the product leaves torch's default alone.
os.environ.setdefault("OMP_NUM_THREADS", "1")
BACKENDS = ("sqlite", "postgresql")
# Tests check behaviour, never wall-clock time: hypothesis' default 200 ms deadline per example
# failed a property test on a loaded 2-core machine (its own load, not the code's speed).
settings.register_profile("deck", deadline=None)
settings.load_profile("deck")

# The smallest real GRPO run: the built-in tiny random model, one group of 4, 16 tokens.
TINY: dict[str, Any] = {"model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
                        "num_generations": 4, "max_completion_length": 16, "logging_steps": 1}
LENGTH_REWARD: list[dict[str, Any]] = [{"name": "length_target", "params": {"target": 20}}]


def tiny_spec(**overrides: Any) -> dict[str, Any]:
    """A fresh copy of the tiny run spec (length reward), with ``overrides`` applied."""
    return {**TINY, "rewards": [dict(r) for r in LENGTH_REWARD], **overrides}


def trainer_state(steps: range | list[int], *, max_steps: int | None = None,
                  **series: float | str | Callable[[int], float | str]) -> dict[str, Any]:
    """A ``trainer_state.json`` document as TRL writes it: one ``log_history`` row per step;
    each keyword is a metric, either a constant or a function of the step."""
    steps = list(steps)
    history = [{"step": s, **{k: (f(s) if callable(f) else f) for k, f in series.items()}}
               for s in steps]
    last = steps[-1] if steps else 0
    return {"global_step": last, "max_steps": max_steps or last, "log_history": history}


def write_trainer_state(path: Path, steps: range | list[int], **kwargs: Any) -> Path:
    path.write_text(json.dumps(trainer_state(steps, **kwargs)))
    return path


def migrate(url: str, revision: str = "head", verb: str = "upgrade") -> None:
    """``alembic upgrade head`` (or ``verb`` to ``revision``) on the database at ``url``."""
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", url)
    getattr(command, verb)(cfg, revision)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database on each backend: the migration tests' ground."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
        return
    with postgres_database(prefix="grpodeck_mig") as pg:
        yield pg


@contextmanager
def postgres_database(prefix: str = "grpodeck_test", template: str | None = None
                      ) -> Iterator[str]:
    """A fresh PostgreSQL database with a random name (helpers share the server), empty or a
    copy of ``template``; yields its SQLAlchemy URL and drops it afterwards, whatever happened."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres_only: runs on PostgreSQL only (fuzzing: it "
                                       "refuses more than SQLite: NUL, integer ranges, NaN)")
    config.addinivalue_line("markers", "one_backend: in-process test whose subject is not "
                                       "storage; runs on SQLite only")
    config.addinivalue_line("markers", "live: starts a live stack, a browser or packaging venvs "
                                       "(found by tests/live_marker.py; `make test-fast` leaves "
                                       "these out)")
    make_groups_folder(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_live(item):
            item.add_marker(pytest.mark.live)


# Under pytest-xdist (``make test``: ``-n 4 --dist loadscope``) the tests that share a live
# resource (a session- or module-scoped fixture: a stack, built wheels, a bench run) run on one
# worker, so each starts once; every other test is its own scope and spreads freely
# (tests/scheduling.py). (``--dist loadgroup`` with ``xdist_group`` marks would say the same by
# hand, but xdist 3.8 cannot tag node ids under pytest 9, so it silently groups nothing.)
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return make_scheduler(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    forget_groups(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    tell_worker(node)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reports the collection
def pytest_collection_finish(session: pytest.Session) -> None:
    write_groups(session)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Both backends for tests that reach the database, one for those marked ``one_backend``."""
    if "database_url" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker
        backends = (BACKENDS[:1] if marked("one_backend") else
                    BACKENDS[1:] if marked("postgres_only") else BACKENDS)
        metafunc.parametrize("database_url", backends, indirect=True)


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (or one stack), dropped afterwards."""
    with postgres_database() as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session; each test gets a copy (migrating is slow)."""
    path = tmp_path_factory.mktemp("template") / "grpodeck.db"
    migrate(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A PostgreSQL database migrated once per session (per xdist worker); each test's database
    is a copy (``CREATE DATABASE ... TEMPLATE``), which takes a fraction of a migration."""
    with postgres_database("grpodeck_tpl") as url:
        migrate(url)
        yield url.rsplit("/", 1)[1]


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database already migrated to head, on the backend the test is parametrized with."""
    if request.param == "sqlite":
        path = tmp_path / "grpodeck.db"
        template = request.getfixturevalue("sqlite_template")
        with sqlite3.connect(template) as src, sqlite3.connect(path) as dst:
            src.backup(dst)
        yield f"sqlite:///{path}"
        return
    template = request.getfixturevalue("pg_template")
    with postgres_database(template=template) as url:
        yield url


@pytest.fixture
def app_db(database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """Point the app's settings at a migrated database for in-process tests."""
    monkeypatch.setenv("GRPODECK_DATABASE_URL", database_url)
    monkeypatch.setenv("GRPODECK_BROKER_URL", f"sqla+sqlite:///{tmp_path / 'broker.db'}")
    # the developer's own var/ holds real runs: a test deleting "run 2" must not remove theirs
    monkeypatch.setenv("GRPODECK_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("GRPODECK_DATASETS_DIR", str(tmp_path / "datasets"))
    monkeypatch.setenv("GRPODECK_ARTIFACTS_DIR", str(tmp_path / "artifacts"))
    for cached in (config_module.get_settings, db_module.get_engine, db_module.get_sessionmaker):
        cached.cache_clear()
    yield database_url
    db_module.get_engine().dispose()
    for cached in (config_module.get_settings, db_module.get_engine, db_module.get_sessionmaker):
        cached.cache_clear()
