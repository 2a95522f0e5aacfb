"""A stack that requires login: its database has an admin (made with the CLI, as a user would)
before the web app starts."""

from __future__ import annotations

import subprocess
import sys

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
