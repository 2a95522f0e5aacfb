"""MLflow 3's default store, ``mlflow.db`` (tracking URI ``sqlite:///mlflow.db``), written by
MLflow itself (issue 56: it was refused as "binary file"). Imported by ``grpodeck import``, the
upload API and the upload form: one Deck run per MLflow run (deleted runs left out), named
after its experiment and MLflow run name, with its metrics by step (NaN and infinities as
logged), its params (as numbers where they were) and its model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.importers import load_log

# MLflow's own client, as a training script uses it, in a process of its own (MLflow keeps
# process-wide state); the rows are the synthetic runs of tests/importers/test_readers.py.
MAKE_STORE = textwrap.dedent("""
    import math, sys
    from mlflow import MlflowClient
    from mlflow.entities import Metric
    sys.path.insert(0, sys.argv[2])
    from tests.importers.test_readers import collapsing, healthy
    client = MlflowClient(tracking_uri=f"sqlite:///{sys.argv[1]}")
    exp = client.create_experiment("grpo-qwen")
    def run(name, rows, params):
        made = client.create_run(exp, run_name=name)
        rid = made.info.run_id
        for key, value in params.items():
            client.log_param(rid, key, value)
        for step, metrics in rows:
            client.log_batch(rid, metrics=[Metric(k, v, 1796606617000 + step, step)
                                           for k, v in metrics.items()])
        client.set_terminated(rid)
        return made
    run("healthy-run", healthy(), {"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct",
                                   "num_generations": "8", "source_format": "mine"})
    run("collapsing-run", collapsing(), {})
    odd = run(None, [(1, {"reward": 0.1, "lr": 1e-6}), (2, {"reward": math.nan, "lr": 1e-6}),
                     (3, {"reward": math.inf, "lr": 1e-6})], {})
    print(odd.info.run_name)
    gone = run("deleted-run", healthy(5), {})
    client.delete_run(gone.info.run_id)
""")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(the mlflow.db, the name MLflow generated for the run started without one)."""
    folder = tmp_path_factory.mktemp("mlflow-db")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", MAKE_STORE, str(folder / "mlflow.db"),
                           str(root)], check=True, timeout=300, capture_output=True, text=True,
                          cwd=folder, env={**os.environ, "MLFLOW_TRACKING_URI": ""})
    return folder / "mlflow.db", done.stdout.strip().splitlines()[-1]


def _imported(client: TestClient) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in client.get("/api/runs").json() if r["source"] == "imported"}


def _check(client: TestClient, store: tuple[Path, str], prefix: str = "grpo-qwen") -> None:
    runs = _imported(client)
    unnamed = f"{prefix}/{store[1]}"
    assert set(runs) == {f"{prefix}/healthy-run", f"{prefix}/collapsing-run", unnamed}
    healthy = runs[f"{prefix}/healthy-run"]
    spec = healthy["spec"]
    assert spec["source_format"] == "mlflow_db" and spec["mlflow_run"] == "healthy-run"
    assert spec["mlflow_experiment"] == "grpo-qwen" and len(spec["mlflow_run_id"]) == 32
    assert spec["model"] == "Qwen/Qwen2.5-0.5B-Instruct" and spec["num_generations"] == 8
    assert client.get(f"/api/runs/{healthy['id']}/findings").json()["verdict"] == "healthy"
    series = client.get(f"/api/runs/{healthy['id']}/metrics",
                        params={"names": "reward,completions/mean_length"}).json()
    assert series["reward"]["steps"] == list(range(1, 121))
    assert len(series["completions/mean_length"]["steps"]) == 120
    findings = client.get(f"/api/runs/{runs[f'{prefix}/collapsing-run']['id']}/findings").json()
    assert "reward_collapse" in {f["category"] for f in findings["findings"]}
    odd = client.get(f"/api/runs/{runs[unnamed]['id']}/metrics",
                     params={"names": "reward"}).json()["reward"]
    assert odd["steps"] == [1, 2, 3] and odd["values"][0] == pytest.approx(0.1)
    assert odd["values"][1:] == ["nan", "inf"]  # JSON has no NaN: the API writes them so


def test_grpodeck_import_reads_every_run_of_an_mlflow_db(client: TestClient,
                                                         store: tuple[Path, str]) -> None:
    done = CliRunner().invoke(cli, ["import", str(store[0])])
    assert done.exit_code == 0, done.output
    assert done.output.count("imported run") == 3
    _check(client, store)


def test_the_upload_api_and_the_form_take_an_mlflow_db(client: TestClient,
                                                       store: tuple[Path, str]) -> None:
    reply = client.post("/api/imports", files={"log": ("mlflow.db", store[0].read_bytes())})
    assert reply.status_code == 201, reply.text
    assert len(reply.json()["runs"]) == 3
    _check(client, store)
    form = client.post("/runs/import", data={"name": "again"}, follow_redirects=False,
                       files={"log": ("mlflow.db", store[0].read_bytes())})
    assert form.status_code == 303, form.text
    assert {n for n in _imported(client) if n.startswith("again/")} == {
        "again/healthy-run", "again/collapsing-run", f"again/{store[1]}"}


def test_diagnose_names_the_runs_of_a_store_it_cannot_read_as_one(
        store: tuple[Path, str]) -> None:
    from app.importers import LogFormatError

    with pytest.raises(LogFormatError, match="3 MLflow runs .*healthy-run"):
        load_log(store[0])


def test_diagnose_reads_a_store_of_one_run(store: tuple[Path, str], tmp_path: Path) -> None:
    import shutil
    import sqlite3

    one = tmp_path / "mlflow.db"
    shutil.copy(store[0], one)
    with sqlite3.connect(one) as db:  # as MlflowClient.delete_run leaves the others
        db.execute("UPDATE runs SET lifecycle_stage = 'deleted' WHERE name != 'healthy-run'")
    done = CliRunner().invoke(cli, ["diagnose", str(one)])
    assert done.exit_code == 0, done.output
    assert "Read: mlflow_db, 120 steps" in done.output and "HEALTHY" in done.output
