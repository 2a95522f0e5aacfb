"""A trackio project made by trackio itself, imported through the upload form and the CLI: one
imported run per trackio run, with its charts' series and findings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli

MAKE_PROJECT = textwrap.dedent("""
    import math, trackio
    for run, reward in (("steady", lambda s: 0.1 + 0.01 * s), ("flat", lambda s: 0.0)):
        trackio.init(project="tutorial", name=run, config={"num_generations": 4, "beta": 0.0})
        for step in range(1, 31):
            trackio.log({"train/loss": 1 / step, "train/reward": reward(step),
                         "train/reward_std": 0.0 if run == "flat" else 0.2,
                         "train/frac_reward_zero_std": 1.0 if run == "flat" else 0.0,
                         "eval/loss": 2 / step}, step=step)
        trackio.finish()
""")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("trackio")
    subprocess.run([sys.executable, "-c", MAKE_PROJECT], check=True, timeout=180,
                   env={**os.environ, "TRACKIO_DIR": str(store)}, capture_output=True)
    return store / "tutorial.db"


def _imported(client: TestClient) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["name"]: r for r in client.get("/api/runs").json() if r["source"] == "imported"}


def _check(client: TestClient, prefix: str) -> None:
    runs = _imported(client)
    assert set(runs) == {f"{prefix}/steady", f"{prefix}/flat"}
    steady = runs[f"{prefix}/steady"]
    assert steady["spec"]["source_format"] == "trackio" and steady["spec"]["num_generations"] == 4
    series = client.get(f"/api/runs/{steady['id']}/metrics",
                        params={"names": "reward,loss,eval_loss"}).json()
    assert series["reward"]["steps"] == list(range(1, 31))
    assert series["reward"]["values"][-1] == pytest.approx(0.4)
    assert series["eval_loss"]["values"][0] == pytest.approx(2.0)
    flat = runs[f"{prefix}/flat"]["id"]
    assert client.get(f"/runs/{flat}").status_code == 200
    findings = client.get(f"/api/runs/{flat}/findings").json()["findings"]
    assert any("spread" in f["summary"].lower() or "zero" in f["summary"].lower()
               for f in findings), findings  # a reward with no spread is diagnosed


def test_the_upload_form_imports_every_run_of_a_trackio_project(client: TestClient,
                                                                 project: Path) -> None:
    reply = client.post("/runs/import", data={"name": "tut"}, follow_redirects=False,
                        files={"log": ("tutorial.db", project.read_bytes())})
    assert reply.status_code == 303, reply.text
    _check(client, "tut")


def test_grpodeck_import_takes_a_trackio_project(client: TestClient, project: Path) -> None:
    done = CliRunner().invoke(cli, ["import", str(project)])
    assert done.exit_code == 0, done.output
    assert done.output.count("imported run") == 2
    _check(client, "tutorial")


def test_a_sqlite_file_that_is_not_trackio_is_a_clear_422(client: TestClient,
                                                          tmp_path: Path) -> None:
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    reply = client.post("/runs/import", files={"log": ("other.db", other.read_bytes())})
    assert reply.status_code == 422 and "not a trackio project" in reply.text
