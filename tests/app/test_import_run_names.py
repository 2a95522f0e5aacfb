"""What an imported run is called when the user names none (issue 56): it was the last part of
the path, so a TensorBoard ``runs/`` folder was "runs" and an MLflow store "mlruns". Now an
MLflow run is called by its experiment and run name, a generic folder (runs, logs, tb, output,
...) by the run subfolder its events are in, else by the folder above it; a meaningful folder
name stays. Written by the real writers (torch's SummaryWriter, MLflow's own client)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.imports.service import read_log
from tests.conftest import write_trainer_state
from tests.importers.test_readers import healthy, write_tensorboard


def mlruns(store: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file store with a run in the experiment grpo-qwen and one in MLflow's Default."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps it, deprecated
    client = MlflowClient(tracking_uri=store.as_uri())
    for experiment, run_name in (("grpo-qwen", "first-try"), (None, "solo")):
        exp = client.create_experiment(experiment) if experiment else "0"
        if experiment is None:
            client.get_experiment("0")  # the file store makes Default on first use
        run = client.create_run(exp, run_name=run_name).info.run_id
        client.log_batch(run, metrics=[Metric(k, v, 1796606617000 + s, s)
                                       for s, m in healthy(5) for k, v in m.items()])
        client.set_terminated(run)
    return store


def test_a_tensorboard_runs_folder_is_named_after_its_run_subfolder(tmp_path: Path) -> None:
    write_tensorboard(tmp_path / "grpo-qwen" / "runs" / "Dec02_09-31-25_host", healthy(5))
    assert read_log(tmp_path / "grpo-qwen" / "runs").name == "Dec02_09-31-25_host"


def test_events_right_in_a_generic_folder_take_the_name_above_it(tmp_path: Path) -> None:
    folder = write_tensorboard(tmp_path / "qwen-math" / "tensorboard", healthy(5))
    assert read_log(folder).name == "qwen-math"
    [event_file] = folder.glob("events.out.tfevents.*")
    assert read_log(event_file).name == "qwen-math"  # an event file: its run folder's name
    logs = write_tensorboard(tmp_path / "qwen-code" / "outputs" / "logs", healthy(5))
    assert read_log(logs).name == "qwen-code"


def test_a_meaningful_folder_keeps_its_name(tmp_path: Path) -> None:
    write_tensorboard(tmp_path / "tb-run" / "Dec02_host", healthy(5))
    assert read_log(tmp_path / "tb-run").name == "tb-run"


def test_a_trl_output_folder_called_output_is_named_above_it(tmp_path: Path) -> None:
    run = tmp_path / "qwen-gsm8k" / "output"
    (run / "checkpoint-4").mkdir(parents=True)
    write_trainer_state(run / "checkpoint-4" / "trainer_state.json", range(1, 5), reward=0.5)
    assert read_log(run).name == "qwen-gsm8k"
    assert read_log(run / "checkpoint-4").name == "qwen-gsm8k"
    assert read_log(run / "checkpoint-4" / "trainer_state.json").name == "qwen-gsm8k"


def test_an_mlruns_store_is_named_by_mlflow(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = mlruns(tmp_path / "mlruns", monkeypatch)
    experiment, default = (p for p in sorted(store.iterdir()) if p.name != ".trash"
                           and any(p.glob("*/meta.yaml")) and p.name != "models")
    names = {read_log(default).name, read_log(experiment).name}
    assert names == {"solo", "grpo-qwen/first-try"}


def _tar(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buffer.getvalue()


def test_uploaded_folders_are_named_the_same_way(client: TestClient, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    write_tensorboard(tmp_path / "runs" / "Dec02_host", healthy(5))
    reply = client.post("/api/imports", files={"archive": ("runs.tar.gz", _tar(tmp_path / "runs"))})
    assert reply.status_code == 201, reply.text
    assert reply.json()["runs"][0]["name"] == "Dec02_host"
    store = mlruns(tmp_path / "store" / "mlruns", monkeypatch)
    [experiment] = [p for p in store.iterdir() if p.name not in ("0", ".trash", "models")
                    and p.is_dir()]
    reply = client.post("/api/imports", files={"archive": ("exp.tar.gz", _tar(experiment))})
    assert reply.status_code == 201, reply.text
    assert reply.json()["runs"][0]["name"] == "grpo-qwen/first-try"
    # events right in an uploaded generic folder: nothing of the server's is a name
    write_tensorboard(tmp_path / "logs", healthy(5))
    reply = client.post("/api/imports", files={"archive": ("logs.tar.gz", _tar(tmp_path / "logs"))})
    assert reply.json()["runs"][0]["name"] == "logs"
