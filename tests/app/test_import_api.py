"""``POST /api/imports``: a log uploaded over HTTP becomes an imported run, the same as
``grpodeck import`` on the server; what cannot be read is refused with its reason, and nothing
is stored then."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from grpodeck.client.upload import folder_archive
from tests.app.test_imports import trl_output_dir
from tests.conftest import trainer_state

STATE = json.dumps(trainer_state(range(1, 6), reward=lambda s: s / 10, loss=0.1)).encode()


def run_count(client: TestClient) -> int:
    return len(client.get("/api/runs").json())


def test_an_uploaded_log_becomes_an_imported_run(client: TestClient) -> None:
    reply = client.post("/api/imports", files={"log": ("trainer_state.json", STATE)},
                        data={"name": "uploaded", "map": ["Reward=reward"]})
    assert reply.status_code == 201, reply.text
    [run] = reply.json()["runs"]
    assert run["name"] == "uploaded" and run["url"].endswith(f"/runs/{run['id']}")
    stored = client.get(f"/api/runs/{run['id']}").json()
    assert stored["source"] == "imported" and stored["spec"]["source_file"] == "trainer_state.json"
    series = client.get(f"/api/runs/{run['id']}/metrics").json()
    assert series["reward"]["steps"] == [1, 2, 3, 4, 5]


def test_a_run_folder_archive_keeps_its_name_and_rollouts(client: TestClient,
                                                          tmp_path: Path) -> None:
    folder = trl_output_dir(tmp_path / "my-grpo-run")
    (folder / "checkpoint-40" / "model.safetensors").write_bytes(b"\0" * 1000)  # left behind
    reply = client.post("/api/imports", files={
        "archive": ("my-grpo-run.tar.gz", folder_archive(folder), "application/gzip")})
    assert reply.status_code == 201, reply.text
    [run] = reply.json()["runs"]
    assert run["name"] == "my-grpo-run"
    assert client.get(f"/api/runs/{run['id']}/rollouts").json()["steps"] == list(range(1, 41, 2))


def test_the_archive_leaves_model_weights_out() -> None:
    with tarfile.open(fileobj=io.BytesIO(_archive_of_weights()), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["run", "run/training_args.bin", "run/x.json"]


def _archive_of_weights() -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        for name in ("x.json", "training_args.bin", "model.safetensors", "optimizer.pt"):
            (run / name).write_bytes(b"x")
        return folder_archive(run)


def _tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_what_cannot_be_imported_is_refused_with_its_reason_and_nothing_is_stored(
        client: TestClient, tmp_path: Path) -> None:
    before = run_count(client)
    cases = [
        ({}, {}, "exactly one of"),
        ({"log": ("a.json", STATE), "archive": ("a.tar.gz", _tar({"a/x": b"1"}))}, {},
         "exactly one of"),
        ({"log": ("notes.txt", b"hello, no metrics here")}, {}, ""),
        ({"archive": ("a.tar.gz", b"not a tar at all")}, {}, "tar.gz"),
        ({"archive": ("a.tar.gz", _tar({"../escape/trainer_state.json": STATE}))}, {},
         "member '../escape/trainer_state.json' points outside the archive"),
        ({"log": ("trainer_state.json", STATE)}, {"map": ["no-equals-sign"]}, "map"),
    ]
    for files, data, reason in cases:
        reply = client.post("/api/imports", files=files or {"x": ("x", b"")}, data=data)
        assert reply.status_code == 422, (files.keys(), reply.text)
        detail = reply.json()["detail"]
        assert isinstance(detail, str) and reason in detail, detail
    assert run_count(client) == before
    assert not (tmp_path.parent / "escape").exists()


def test_an_archive_that_unpacks_to_far_more_than_it_weighs_is_refused(
        client: TestClient) -> None:
    bomb = _tar({"run/trainer_state.json": STATE, "run/zeros.log": b"\0" * 20_000_000})
    reply = client.post("/api/imports", files={"archive": ("run.tar.gz", bomb)})
    assert reply.status_code == 413 and "50x" in reply.json()["detail"], reply.text


def test_an_upload_gets_the_upload_limit_not_the_json_one(client: TestClient,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1 MB log passes (the JSON API's limit is 256 KiB); one over the upload limit is a 413
    before it is read."""
    from app.core.config import get_settings
    from app.main import create_app

    big = json.dumps(trainer_state(range(1, 6000), reward=0.5, loss=0.1, kl=0.01)).encode()
    assert 256 * 1024 < len(big) < 200 * 1024 * 1024
    assert client.post("/api/imports", files={"log": ("big.json", big)}).status_code == 201
    monkeypatch.setenv("GRPODECK_UPLOAD_MAX_BODY_BYTES", "100000")
    get_settings.cache_clear()
    small = TestClient(create_app(), base_url="http://127.0.0.1")
    reply = small.post("/api/imports", files={"log": ("big.json", big)})
    assert reply.status_code == 413 and "97.6562 KiB" in reply.json()["detail"], reply.text
