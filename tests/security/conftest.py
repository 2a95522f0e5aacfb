"""The in-process app fixtures of tests/app, shared here (the security tests reuse them)."""

from tests.app.conftest import client, running  # noqa: F401
