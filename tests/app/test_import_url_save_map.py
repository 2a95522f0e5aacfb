"""``grpodeck import --url URL --save-map`` (issue 56): it was refused ("--save-map is for a
local import") though ``POST /api/imports`` takes ``save_map``; now the CLI sends it, and the
Deck remembers the mapping for the uploader's next log of that name. The CLI talks HTTP to a
real uvicorn serving the app on a migrated database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli import cli
from bench.simulated_logs import ODD_KEYS, handwritten_stalled
from tests.served import served_app


@pytest.fixture
def server(app_db: str) -> Iterator[str]:
    """The app behind a real uvicorn (``tests.served``)."""
    with served_app(16) as url:
        yield url


def test_import_url_save_map_sends_the_mapping_to_remember(server: str, tmp_path: Path) -> None:
    log = tmp_path / "loop.log"
    log.write_text(handwritten_stalled(keys=ODD_KEYS))
    runner = CliRunner()
    first = runner.invoke(cli, ["import", str(log), "--url", server, "--map", "Score=reward",
                                "--map", "Div=kl", "--save-map"])
    assert first.exit_code == 0, first.output
    saved = httpx.get(f"{server}/api/imports/mappings", timeout=30).json()
    assert [(m["source"], m["mapping"]) for m in saved] == [("loop.log", "Div=kl, Score=reward")]
    # the next log of that name, sent without --map, is read with the remembered mapping
    again = runner.invoke(cli, ["import", str(log), "--url", server, "--name", "again"])
    assert again.exit_code == 0, again.output
    [run] = [r for r in httpx.get(f"{server}/api/runs", timeout=30).json()
             if r["name"] == "again"]
    spec = httpx.get(f"{server}/api/runs/{run['id']}", timeout=30).json()["spec"]
    assert spec["mapping_saved_for"] == "loop.log"
    assert set(httpx.get(f"{server}/api/runs/{run['id']}/metrics", timeout=30).json()) \
        >= {"reward", "kl"}
