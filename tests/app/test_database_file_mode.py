"""The SQLite database and its -wal/-shm are readable by their owner only (issue 22, point 6):
``var/grpodeck.db`` was created world-readable, with password hashes and run tokens inside."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from app.core.db import make_engine


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The usual umask 022, which makes new files world-readable."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_and_its_wal_files_are_0600(tmp_path: Path, open_umask: None) -> None:
    db = tmp_path / "var" / "grpodeck.db"
    engine = make_engine(f"sqlite:///{db}")
    with engine.connect() as conn:  # open: the -wal and -shm files exist now
        conn.execute(text("CREATE TABLE t (x TEXT)"))
        conn.execute(text("INSERT INTO t VALUES ('secret')"))
        conn.commit()
        files = [db, db.with_name("grpodeck.db-wal"), db.with_name("grpodeck.db-shm")]
        assert all(f.exists() for f in files)
        assert {str(f.name): mode(f) for f in files} == {f.name: 0o600 for f in files}
    engine.dispose()
    assert mode(db.parent) == 0o700


def test_an_existing_world_readable_database_is_made_private(tmp_path: Path,
                                                             open_umask: None) -> None:
    db = tmp_path / "grpodeck.db"
    db.touch(mode=0o644)
    db.chmod(0o644)
    make_engine(f"sqlite:///{db}").dispose()
    assert mode(db) == 0o600
