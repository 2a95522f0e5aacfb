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


def test_an_existing_data_home_is_made_0700_and_another_folder_left_alone(
        tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: a ``var/`` that already existed (made by hand, or by an older version) stayed
    0755 around the database, the broker and the run folders. A folder the user chose for the
    database (their home folder) is theirs: its mode is not changed."""
    home, elsewhere = tmp_path / "var", tmp_path / "mine"
    for folder in (home, elsewhere):
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    monkeypatch.setenv("GRPODECK_HOME", str(home))
    make_engine(f"sqlite:///{home / 'grpodeck.db'}").dispose()
    make_engine(f"sqlite:///{elsewhere / 'grpodeck.db'}").dispose()
    assert mode(home) == 0o700 and mode(elsewhere) == 0o755


def test_the_embedded_broker_makes_an_existing_data_home_0700(
        tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from grpodeck.contract.tasks import private_broker_file

    home = tmp_path / "var"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    monkeypatch.setenv("GRPODECK_HOME", str(home))
    private_broker_file(f"sqla+sqlite:///{home / 'broker.db'}")
    assert mode(home) == 0o700 and mode(home / "broker.db") == 0o600
