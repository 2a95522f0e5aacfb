"""A stack that requires login: its database has an admin (made with the CLI, as a user would)
before the web app starts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.core.config import ROOT
from tests.stack import Stack

ADMIN, PASSWORD = "admin@example.com", "correct horse battery"


def cli(*args: str, env: dict[str, str], stdin: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], env=env, cwd=ROOT, check=False,
                          input=stdin, capture_output=True, text=True, timeout=timeout)


class LoggedInStack(Stack):
    def start(self) -> Stack:
        made = cli("user", "create", "--admin", ADMIN, "--password-stdin", env=self.env,
                   stdin=PASSWORD + "\n")
        assert made.returncode == 0, made.stderr
        return super().start()


@contextmanager
def locked_stack(workdir: Path) -> Iterator[Stack]:
    """A started logged-in stack on SQLite, stopped afterwards whatever happened."""
    stack = LoggedInStack(f"sqlite:///{workdir / 'grpodeck.db'}",
                          f"sqla+sqlite:///{workdir / 'broker.db'}", workdir).start()
    try:
        yield stack
    finally:
        stack.stop()
