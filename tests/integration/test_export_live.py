"""``grpodeck export RUN --url`` against a real served Deck that requires login (issue 56,
item 4): it downloads with an API key, the same file ``grpodeck export`` writes from the
database; without a key it is refused with what to do, and a run that is not there is exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.locked_stack import ADMIN, PASSWORD, cli
from tests.stack import Stack


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, str]]:
    """A web app alone (no worker: nothing trains here) with an admin and their API key."""
    workdir = tmp_path_factory.mktemp("export")
    stack = Stack(f"sqlite:///{workdir / 'grpodeck.db'}",
                  f"sqla+sqlite:///{workdir / 'broker.db'}", workdir)
    try:
        assert cli("migrate", env=stack.env).returncode == 0
        made = cli("user", "create", "--admin", ADMIN, "--password-stdin", env=stack.env,
                   stdin=PASSWORD + "\n")
        assert made.returncode == 0, made.stderr
        key = cli("user", "api-key", ADMIN, "--name", "export", env=stack.env).stdout.strip()
        stack.start_web()
        yield stack, key
    finally:
        stack.stop()


def test_export_url_downloads_with_an_api_key(keyed: tuple[Stack, str], tmp_path: Path) -> None:
    stack, key = keyed
    log = tmp_path / "run.jsonl"
    log.write_text("\n".join(json.dumps({"step": s, "reward": 0.01 * s, "loss": "nan"
                                         if s == 3 else 0.2}) for s in range(1, 31)))
    imported = cli("import", str(log), "--name", "exported", env=stack.env)
    assert imported.returncode == 0, imported.stderr
    run_id = imported.stdout.split()[2]
    env = {k: v for k, v in stack.env.items() if k != "GRPODECK_API_KEY"}
    local, remote = tmp_path / "local.csv", tmp_path / "remote.csv"
    done = cli("export", run_id, "--format", "csv", "-o", str(local), env=env)
    assert done.returncode == 0, done.stderr
    done = cli("export", run_id, "--format", "csv", "--url", stack.url, "-o", str(remote),
               env={**env, "GRPODECK_API_KEY": key})
    assert done.returncode == 0, done.stderr
    assert f"exported run {run_id}: 30 rows (csv)" in done.stderr
    assert remote.read_text() == local.read_text()
    assert remote.read_text().splitlines()[3] == "3,nan,0.03"

    refused = cli("export", run_id, "--url", stack.url, "-o", str(tmp_path / "no.jsonl"),
                  env=env)
    assert refused.returncode == 1 and "GRPODECK_API_KEY" in refused.stderr
    assert not (tmp_path / "no.jsonl").exists() and not (tmp_path / "no.jsonl.part").exists()
    missing = cli("export", "999", "--url", stack.url, env={**env, "GRPODECK_API_KEY": key})
    assert missing.returncode == 2 and "run 999 not found" in missing.stderr
