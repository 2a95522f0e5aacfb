"""A sandboxed program reads none of the deployment's files (issue 22, point 6): the project
checkout (code, ``.env``, ``var/`` with the database), the data directories and home folders
are empty read-only tmpfs inside its mount namespace, even where they are world-readable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpodeck.contract.tasks import ROOT
from worker import sandbox
from worker.rewards.code import run_unit_tests

FAST = sandbox.Limits(wall_seconds=5, cpu_seconds=5)
SECRET = "argon2-hash-and-run-token-in-the-database"
# The program reports what it could read: a share of tests tells nothing, so the test asks f().
SNOOP = """
import os
found = []
def look(path):
    try:
        if os.path.isdir(path):
            found.extend(path + '/' + n for n in os.listdir(path))
        else:
            found.append(open(path, errors='replace').read(200))
    except OSError:
        pass
for path in PATHS:
    look(path)
found.append(os.getcwd() + ' ' + ' '.join(os.listdir('.')))
found.append(repr(sorted(os.environ.items())))
def f():
    return found
"""


@pytest.fixture
def world_readable_database() -> Iterator[Path]:
    """A world-readable 'database' inside the project's own folder, like var/grpodeck.db was."""
    folder = ROOT / f".sandbox-var-{os.getpid()}"
    folder.mkdir(mode=0o755)
    db = folder / "grpodeck.db"
    db.write_text(SECRET)
    db.chmod(0o644)
    try:
        yield db
    finally:
        db.unlink()
        folder.rmdir()


def test_the_database_and_the_project_are_hidden(world_readable_database: Path) -> None:
    assert sandbox.isolation().namespaces, "this host supports namespaces: it must hide files"
    code = f"PATHS = {[str(world_readable_database), str(ROOT), str(ROOT / 'README.md')]!r}\n"
    outcomes, _ = run_unit_tests(
        [code + SNOOP], [["seen = ' '.join(f())\nassert 'SECRET' not in seen, seen"
                          .replace("SECRET", SECRET)
                          + "\nassert 'README' not in seen and 'GRPODECK' not in seen, seen"
                          + f"\nassert {str(ROOT)!r} not in seen, seen"]], limits=FAST)
    assert (outcomes[0].score, outcomes[0].reason) == (1.0, None)
    # The worker itself still reads it: only the sandbox's view is empty.
    assert world_readable_database.read_text() == SECRET


def test_data_directories_and_the_database_folder_are_on_the_hidden_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_DATABASE_URL", f"sqlite:///{tmp_path / 'db' / 'grpodeck.db'}")
    monkeypatch.setenv("GRPODECK_SANDBOX_HIDE", "/srv/deck-extra")
    sandbox.hidden_paths.cache_clear()
    try:
        hidden = sandbox.hidden_paths()
    finally:
        sandbox.hidden_paths.cache_clear()
    from worker.settings import get_settings
    settings = get_settings()
    assert {str(ROOT), str(tmp_path / "db"), "/srv/deck-extra", str(Path.home()),
            str(settings.datasets_dir), str(settings.models_dir),
            str(settings.runs_dir)} <= set(hidden)
    assert not any(Path(sandbox.sandbox_python()).is_relative_to(h) for h in hidden)
