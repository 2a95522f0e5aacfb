"""``run.log_artifact`` against a real GRPO Deck (uvicorn + SQLite, tests/stack.py): a file and a
folder (as a tar) upload with the run's token, list on the run and download identical; a bad
name is refused before anything is sent; an ended run uploads nothing."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import httpx
import pytest

from grpodeck.client import init
from grpodeck.client.artifacts import ArtifactError
from tests.client.test_callback_live import (  # noqa: F401  (fixtures)
    deck,
    finish,
    model_dir,
    run_id_of,
    start_script,
)
from tests.stack import Stack


def test_log_artifact_uploads_files_and_folders(deck: Stack, tmp_path: Path) -> None:  # noqa: F811
    state = tmp_path / "trainer_state.json"
    state.write_text('{"global_step": 5}')
    folder = tmp_path / "checkpoint-5"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(os.urandom(300_000))
    (folder / "sub" / "config.json").write_text("{}")
    os.symlink("/etc/hostname", folder / "outside-link")  # never followed, never sent
    run = init(deck.url, "artifact-script", spool_dir=tmp_path / "spool")
    run.log({"loss": 1.0}, step=5)
    first = run.log_artifact(state, kind="trainer_state", step=5)
    second = run.log_artifact(folder, kind="checkpoint", step=5)
    assert first is not None and second is not None
    with pytest.raises(ArtifactError, match="name"):
        run.log_artifact(state, name="../../escape.json")
    run.finish()
    listed = httpx.get(f"{deck.url}/api/runs/{run.id}/artifacts", timeout=10).json()
    assert [(a["name"], a["kind"], a["step"]) for a in listed] == [
        ("checkpoint-5.tar", "checkpoint", 5), ("trainer_state.json", "trainer_state", 5)]
    tar_bytes = httpx.get(f"{deck.url}{listed[0]['url']}", timeout=30).content
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        files = {m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                 for m in tar.getmembers() if m.isfile()}
        assert not any(m.issym() for m in tar.getmembers())
    assert files == {"checkpoint-5/model.safetensors":
                     (folder / "model.safetensors").read_bytes(),
                     "checkpoint-5/sub/config.json": b"{}"}
    assert httpx.get(f"{deck.url}{listed[1]['url']}", timeout=10).content == state.read_bytes()
    assert run.log_artifact(state) is None  # finished: nothing more is sent


def test_an_ended_runs_token_is_refused(deck: Stack, tmp_path: Path) -> None:  # noqa: F811
    run = init(deck.url, "artifact-late", spool_dir=tmp_path / "spool")
    token, run_id = run.info.token, run.id  # type: ignore[union-attr]
    run.finish()
    reply = httpx.post(f"{deck.url}/api/runs/{run_id}/artifacts", params={"name": "x.bin"},
                       content=b"x", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert reply.status_code == 401
    assert httpx.get(f"{deck.url}/api/runs/{run_id}/artifacts", timeout=10).json() == []


def _tar_files(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def test_deck_callback_uploads_each_checkpoint_on_save(deck: Stack, model_dir: str,  # noqa: F811
                                                       tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_id = run_id_of(finish(start_script(deck, model_dir, out, "saving-script", 2,
                                           "--save-steps", "1")))
    listed = httpx.get(f"{deck.url}/api/runs/{run_id}/artifacts", timeout=10).json()
    assert [(a["name"], a["kind"], a["step"]) for a in listed] == [
        ("checkpoint-1.tar", "checkpoint", 1), ("checkpoint-2.tar", "checkpoint", 2)]
    for artifact in listed:
        folder = out / artifact["name"].removesuffix(".tar")
        on_disk = {str(p.relative_to(out)): p.read_bytes()
                   for p in sorted(folder.rglob("*")) if p.is_file()}
        data = httpx.get(f"{deck.url}{artifact['url']}", timeout=60).content
        assert _tar_files(data) == on_disk
