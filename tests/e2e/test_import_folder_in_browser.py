"""The import page takes a run folder or an archive of one (issue 56): it took one file, so a
TensorBoard ``runs/`` folder or an MLflow ``mlruns/`` store could not be uploaded from a
browser. Chromium picks the folder (``webkitdirectory``: each file sent with its path inside
it) or the archive as a user does, and the run page shows the imported run. The folders are
written by the real writers (torch's SummaryWriter, MLflow's own client)."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.importers.test_readers import collapsing, healthy, write_tensorboard
from tests.stack import Stack


def _import(page: Page, live: Stack, field: str, path: Path) -> dict:  # type: ignore[type-arg]
    """Upload ``path`` through the form's ``field``; the imported run as the API shows it."""
    page.goto(f"{live.url}/runs/import")
    page.set_input_files(field, str(path))
    page.click("#import")
    page.wait_for_url(re.compile(r".*/runs/\d+$"))
    run_id = page.url.rsplit("/", 1)[-1]
    return httpx.get(f"{live.url}/api/runs/{run_id}", timeout=30).json()  # type: ignore[no-any-return]


def test_a_tensorboard_folder_is_uploaded_from_the_page(page: Page, live: Stack,
                                                        tmp_path: Path) -> None:
    write_tensorboard(tmp_path / "qwen-math" / "runs" / "Dec02_09-31-25_host", collapsing())
    run = _import(page, live, "#f-folder", tmp_path / "qwen-math" / "runs")
    assert run["name"] == "Dec02_09-31-25_host" and run["spec"]["source_format"] == "tensorboard"
    expect(page.locator("h1")).to_contain_text("Dec02_09-31-25_host")
    expect(page.locator("#run-verdict")).to_have_text("critical")  # the collapse is found
    expect(page.locator('.finding[data-category="reward_collapse"]')).to_be_visible()


def test_an_mlruns_folder_is_uploaded_from_the_page(page: Page, live: Stack, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps it, deprecated
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    run_id = client.create_run(client.create_experiment("grpo-qwen"),
                               run_name="first-try").info.run_id
    client.log_param(run_id, "model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct")
    client.log_batch(run_id, metrics=[Metric(k, v, 1796606617000 + s, s)
                                      for s, m in healthy() for k, v in m.items()])
    client.set_terminated(run_id)
    run = _import(page, live, "#f-folder", tmp_path / "mlruns")
    assert run["name"] == "grpo-qwen/first-try"
    assert run["spec"]["source_format"] == "mlflow_file_store"
    assert run["spec"]["model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    expect(page.locator("#run-verdict")).to_have_text("healthy")


def test_an_archive_of_a_folder_goes_in_the_file_field(page: Page, live: Stack,
                                                       tmp_path: Path) -> None:
    write_tensorboard(tmp_path / "tb-run" / "Dec02_host", collapsing())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(tmp_path / "tb-run", arcname="tb-run")
    archive = tmp_path / "tb-run.tar.gz"
    archive.write_bytes(buffer.getvalue())
    run = _import(page, live, "#f-log", archive)
    assert run["name"] == "tb-run" and run["spec"]["source_format"] == "tensorboard"


def test_a_form_with_neither_a_file_nor_a_folder_says_so(page: Page, live: Stack) -> None:
    page.goto(f"{live.url}/runs/import")
    page.click("#import")
    expect(page.locator("#import-error")).to_contain_text("Choose a log file")


def test_a_run_folder_goes_without_its_model_weights(page: Page, live: Stack,
                                                     tmp_path: Path) -> None:
    """A TRL output folder's checkpoints hold the model (gigabytes: past the upload limit);
    no log needs them, so the page leaves them out of the upload, as ``grpodeck import --url``
    does, and says so; the saved arguments (``training_args.bin``) go."""
    from tests.conftest import write_trainer_state

    checkpoint = tmp_path / "qwen-gsm8k" / "checkpoint-4"
    checkpoint.mkdir(parents=True)
    write_trainer_state(checkpoint / "trainer_state.json", range(1, 5), reward=0.5)
    weights = 2 * 1024 * 1024
    (checkpoint / "model.safetensors").write_bytes(b"\x00" * weights)
    (checkpoint / "optimizer.pt").write_bytes(b"\x00" * weights)
    page.goto(f"{live.url}/runs/import")
    page.set_input_files("#f-folder", str(tmp_path / "qwen-gsm8k"))
    expect(page.locator("#folder-note")).to_have_text(
        "2 model weight files left out (no log needs them)")
    with page.expect_request(lambda r: r.method == "POST") as sent:
        page.click("#import")
    size = int(sent.value.header_value("content-length") or 0)  # the body as sent
    assert 0 < size < weights, size
    page.wait_for_url(re.compile(r".*/runs/\d+$"))
    expect(page.locator("h1")).to_contain_text("qwen-gsm8k")
