"""MLflow's own client (``mlflow==3.17.2``, unmodified) reporting to a real GRPO Deck through
``/mlflow`` (uvicorn + SQLite, tests/stack.py): the fluent API a user script calls, a stock TRL
``GRPOTrainer`` with ``report_to="mlflow"`` as its own process, and the refusals in MLflow's
shape (a wrong key, another user's run, an endpoint outside the subset, a bad name)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import mlflow
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from app.core.config import ROOT
from tests.client.test_callback_live import deck, model_dir  # noqa: F401  (fixtures)
from tests.client.test_tracker_live import tagged
from tests.locked_stack import cli, locked_stack
from tests.stack import Stack

SCRIPT = Path(__file__).with_name("mlflow_train_script.py")
NO_RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


@pytest.fixture
def tracking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """MLflow's process-wide state (tracking URI, active run, experiment) reset around a test."""
    for name, value in NO_RETRIES.items():
        monkeypatch.setenv(name, value)
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
                 "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    yield
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.tracking.fluent._active_experiment_id = None  # set_experiment's memory
    # set_experiment also exports MLFLOW_EXPERIMENT_ID; monkeypatch cannot undo a variable it
    # only deleted while absent, and a later test's MLflow client would look it up
    for name in ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_RUN_ID"):
        os.environ.pop(name, None)


def series(stack: Stack, run_id: int, *names: str,
           headers: dict[str, str] | None = None) -> dict[str, dict]:  # type: ignore[type-arg]
    return httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", params={"names": ",".join(names)},
                     headers=headers, timeout=10).json()


def test_the_fluent_client_reports_params_metrics_tags_and_the_end(
        deck: Stack, tracking: None) -> None:  # noqa: F811
    mlflow.set_tracking_uri(f"{deck.url}/mlflow")
    experiment = mlflow.set_experiment("MLflow-Fluent")
    assert (experiment.experiment_id, experiment.name) == ("mlflow-fluent", "mlflow-fluent")
    with mlflow.start_run(run_name="fluent-run") as active:
        run_id = int(active.info.run_id)
        mlflow.log_params({"learning_rate": "1e-4", "num_generations": 4, "model": "tiny",
                           "use_vllm": False})
        mlflow.log_param("max_steps", 3)
        for step in (1, 2, 3):
            mlflow.log_metrics({"loss": 1.0 / step, "reward": 0.25 * step,
                                "completion_length": 10.0 + step}, step=step)
        mlflow.log_metric("grad_norm", 0.5, step=3)
        mlflow.set_tags({"team": "rl", "baseline": ""})
        mlflow.set_tag("team", "infra")  # a key set again replaces its value
        mlflow.set_tag("mlflow.note.content", "tried from MLflow")
    run = deck.run(run_id)
    assert (run["name"], run["source"], run["status"]) == ("fluent-run", "external", "succeeded")
    assert run["spec"]["learning_rate"] == 1e-4 and run["spec"]["num_generations"] == 4
    assert run["spec"]["use_vllm"] is False and run["spec"]["model"] == "tiny"
    assert (run["spec"]["group"], run["max_steps"], run["step"]) == ("mlflow-fluent", 3, 3)
    got = series(deck, run_id, "loss", "reward", "completions/mean_length", "grad_norm")
    assert got["loss"]["steps"] == [1, 2, 3]
    assert got["loss"]["values"] == pytest.approx([1.0, 0.5, 1 / 3])
    assert got["reward"]["values"] == [0.25, 0.5, 0.75]
    assert got["completions/mean_length"]["values"] == [11.0, 12.0, 13.0]  # canonical name
    assert got["grad_norm"] == {"steps": [3], "values": [0.5]}
    for tag in ("group:mlflow-fluent", "team:infra", "baseline"):
        assert [r["id"] for r in tagged(deck, tag)] == [run_id], tag
    assert tagged(deck, "team:rl") == []
    fetched = MlflowClient().get_run(str(run_id))
    assert fetched.info.status == "FINISHED" and fetched.info.experiment_id == "mlflow-fluent"
    assert fetched.data.params["num_generations"] == "4"
    assert fetched.data.tags["team"] == "infra"


def test_nan_and_infinite_metrics_arrive_as_such(deck: Stack, tracking: None) -> None:  # noqa: F811
    mlflow.set_tracking_uri(f"{deck.url}/mlflow")
    with mlflow.start_run(run_name="nan-run") as active:
        mlflow.log_metrics({"loss": float("nan"), "grad_norm": float("inf")}, step=1)
        mlflow.log_metric("loss", 0.5, step=2)
    got = series(deck, int(active.info.run_id), "loss", "grad_norm")
    assert got["loss"]["steps"] == [1, 2] and math.isnan(float(got["loss"]["values"][0]))
    assert got["loss"]["values"][1] == 0.5
    assert float(got["grad_norm"]["values"][0]) == math.inf
    assert deck.run(int(active.info.run_id))["spec"].get("group") is None  # Default experiment


def test_failed_and_killed_end_statuses_map_to_failed_and_cancelled(
        deck: Stack, tracking: None) -> None:  # noqa: F811
    mlflow.set_tracking_uri(f"{deck.url}/mlflow")
    ids = {}
    for status in ("FAILED", "KILLED"):
        active = mlflow.start_run(run_name=f"ends-{status.lower()}")
        mlflow.log_metric("loss", 1.0, step=1)
        mlflow.end_run(status=status)
        ids[status] = int(active.info.run_id)
    failed, killed = deck.run(ids["FAILED"]), deck.run(ids["KILLED"])
    assert (failed["status"], failed["error"]) == ("failed",
                                                   "the MLflow client ended the run as FAILED")
    assert killed["status"] == "cancelled"
    with pytest.raises(MlflowException, match="is failed, not running") as refused:
        MlflowClient().log_metric(str(ids["FAILED"]), "loss", 0.1, step=2)
    assert refused.value.error_code == "INVALID_STATE"


def test_a_run_already_ended_refuses_a_different_end(deck: Stack,  # noqa: F811
                                                     tracking: None) -> None:
    mlflow.set_tracking_uri(f"{deck.url}/mlflow")
    with mlflow.start_run(run_name="ended-once") as active:
        mlflow.log_metric("loss", 1.0, step=1)
    client = MlflowClient()
    client.set_terminated(active.info.run_id, "FINISHED")  # the same end again: nothing changes
    with pytest.raises(MlflowException, match="succeeded, not running"):
        client.set_terminated(active.info.run_id, "FAILED")
    assert deck.run(int(active.info.run_id))["status"] == "succeeded"


def test_the_ui_link_the_client_prints_leads_to_the_runs_list(deck: Stack) -> None:  # noqa: F811
    """MLflow prints "View run at {uri}/#/experiments/0/runs/3": the fragment stays in the
    browser, so the Deck's runs list is where the link can lead."""
    answer = httpx.get(f"{deck.url}/mlflow/", timeout=10)
    assert (answer.status_code, answer.headers["location"]) == (303, "/runs")


def test_an_endpoint_outside_the_subset_is_mlflows_404(deck: Stack,  # noqa: F811
                                                       tracking: None) -> None:
    mlflow.set_tracking_uri(f"{deck.url}/mlflow")
    with pytest.raises(MlflowException, match="not offered") as refused:
        MlflowClient().search_runs(["0"])
    assert refused.value.error_code == "ENDPOINT_NOT_FOUND"
    answer = httpx.delete(f"{deck.url}/mlflow/api/2.0/mlflow/runs/delete", timeout=10)
    assert answer.status_code == 404
    assert answer.json()["error_code"] == "ENDPOINT_NOT_FOUND"
    missing = httpx.get(f"{deck.url}/mlflow/api/2.0/mlflow/runs/get",
                        params={"run_id": "999999"}, timeout=10)
    assert (missing.status_code, missing.json()["error_code"]) == (404,
                                                                  "RESOURCE_DOES_NOT_EXIST")


def test_names_and_tags_the_deck_cannot_hold_are_refused_with_the_reason(
        deck: Stack, tracking: None) -> None:  # noqa: F811
    mlflow.set_tracking_uri(f"{deck.url}/mlflow")
    with pytest.raises(MlflowException, match="experiments are GRPO Deck groups") as bad:
        mlflow.set_experiment("/Users/me/grpo runs")
    assert bad.value.error_code == "INVALID_PARAMETER_VALUE"
    with mlflow.start_run(run_name="bad-tag") as active:
        with pytest.raises(MlflowException, match="does not make a GRPO Deck tag"):
            mlflow.set_tag("owner", "Jane Doe")
        with pytest.raises(MlflowException, match="must be int"):
            mlflow.log_param("num_generations", "four")
    assert tagged(deck, "owner:jane doe") == []
    assert "num_generations" not in deck.run(int(active.info.run_id))["spec"]


def test_trl_report_to_mlflow_reports_reward_and_loss_curves(
        deck: Stack, model_dir: str, tmp_path: Path) -> None:  # noqa: F811
    """Zero code: a stock GRPOTrainer, only MLFLOW_* environment variables point it here."""
    out = tmp_path / "out"
    env = {**os.environ, **NO_RETRIES, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "MLFLOW_TRACKING_URI": f"{deck.url}/mlflow", "MLFLOW_EXPERIMENT_NAME": "trl-mlflow"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--model", model_dir, "--name",
                           "trl-via-mlflow", "--out", str(out), "--steps", "4"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    [summary] = tagged(deck, "group:trl-mlflow")
    run = deck.run(summary["id"])
    assert (run["name"], run["status"], run["step"]) == ("trl-via-mlflow", "succeeded", 4)
    assert run["spec"]["num_generations"] == 4 and run["spec"]["max_steps"] == 4
    logged = json.loads((out / "logged.json").read_text())
    got = series(deck, run["id"], "loss", "reward", "rewards/length_reward/mean")
    assert got["loss"]["steps"] == [1, 2, 3, 4]
    assert got["loss"]["values"] == pytest.approx([r["loss"] for r in logged])
    assert got["reward"]["values"] == pytest.approx([r["reward"] for r in logged])
    assert got["rewards/length_reward/mean"]["steps"] == [1, 2, 3, 4]


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with locked_stack(tmp_path_factory.mktemp("locked-mlflow")) as stack:
        yield stack


def _key(locked: Stack, email: str) -> str:
    key = cli("user", "api-key", email, "--name", "mlflow", env=locked.env).stdout.strip()
    assert key.startswith("gd_")
    return key


def test_a_wrong_token_is_refused_and_an_api_key_reports(
        locked: Stack, tracking: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.locked_stack import ADMIN

    mlflow.set_tracking_uri(f"{locked.url}/mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "gd_wrong")
    with pytest.raises(MlflowException, match="MLFLOW_TRACKING_TOKEN") as refused:
        mlflow.set_experiment("locked")
    assert refused.value.error_code == "UNAUTHENTICATED"
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN")
    with pytest.raises(MlflowException) as anonymous:  # loopback, but accounts exist
        mlflow.start_run(run_name="anonymous")
    assert anonymous.value.error_code == "UNAUTHENTICATED"
    key = _key(locked, ADMIN)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)  # Basic: the password is the key
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", key)
    mlflow.set_experiment("locked")
    with mlflow.start_run(run_name="with-a-key") as active:
        mlflow.log_metric("loss", 0.5, step=1)
    auth = {"Authorization": f"Bearer {key}"}
    run = httpx.get(f"{locked.url}/api/runs/{active.info.run_id}", headers=auth,
                    timeout=10).json()
    assert (run["name"], run["status"]) == ("with-a-key", "succeeded")
    assert series(locked, run["id"], "loss", headers=auth)["loss"]["values"] == [0.5]


def test_another_users_key_cannot_write_to_a_run(locked: Stack, tracking: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.locked_stack import ADMIN

    made = cli("user", "create", "other@example.com", "--password-stdin", env=locked.env,
               stdin="another long password\n")
    assert made.returncode == 0, made.stderr
    mlflow.set_tracking_uri(f"{locked.url}/mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", _key(locked, ADMIN))
    admins = MlflowClient().create_run("0", run_name="admins-run")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", _key(locked, "other@example.com"))
    with pytest.raises(MlflowException, match="belongs to another user") as refused:
        MlflowClient().log_metric(admins.info.run_id, "loss", 1.0, step=1)
    assert refused.value.error_code == "PERMISSION_DENIED"
