"""Run artifacts through the API in process: upload with the run token, list, download, delete,
and every refusal (401/403/404, bad names, unsafe tars, the size cap), retention, run deletion."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from app.core.db import get_sessionmaker
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.app.conftest import SPEC, claim, running_run
from tests.app.test_auth import api_key, make_user

UP = "/api/runs/{}/artifacts"


def put(client: TestClient, run_id: int, headers: dict[str, str], body: bytes, name: str,
        kind: str = "file", step: int | None = None):  # type: ignore[no-untyped-def]
    params: dict[str, str | int] = {"name": name, "kind": kind}
    if step is not None:
        params["step"] = step
    return client.post(UP.format(run_id), params=params, content=body, headers=headers)


def tar_bytes(members: list[tarfile.TarInfo], data: bytes = b"x") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in members:
            if info.isfile():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return buffer.getvalue()


def stored_files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "artifacts").rglob("*") if p.is_file())


def test_an_upload_is_listed_and_downloads_byte_identical(client: TestClient) -> None:
    run_id, headers = running_run(client)
    body = bytes(range(256)) * 4000  # 1 MB, every byte value
    reply = put(client, run_id, headers, body, "weights.bin", kind="model", step=3)
    assert reply.status_code == 201, reply.text
    listed = client.get(UP.format(run_id)).json()
    assert [(a["name"], a["kind"], a["step"], a["size"]) for a in listed] == [
        ("weights.bin", "model", 3, len(body))]
    assert listed[0]["sha256"] == hashlib.sha256(body).hexdigest()
    download = client.get(listed[0]["url"])
    assert download.status_code == 200 and download.content == body
    assert 'filename="weights.bin"' in download.headers["content-disposition"]


def test_the_same_name_again_replaces_the_earlier_file(client: TestClient, tmp_path: Path) -> None:
    run_id, headers = running_run(client)
    assert put(client, run_id, headers, b"old", "state.json").status_code == 201
    assert put(client, run_id, headers, b"new!", "state.json").status_code == 201
    listed = client.get(UP.format(run_id)).json()
    assert [a["size"] for a in listed] == [4]
    assert client.get(listed[0]["url"]).content == b"new!"
    assert len(stored_files(tmp_path)) == 1  # the replaced file is gone from disk


def test_upload_needs_the_runs_own_token(client: TestClient, tmp_path: Path) -> None:
    run_a, headers_a = running_run(client)
    run_b, _headers_b = running_run(client)
    assert put(client, run_a, {}, b"x", "a.bin").status_code == 401
    assert put(client, run_a, {"Authorization": "Bearer nope"}, b"x", "a.bin").status_code == 401
    assert put(client, run_b, headers_a, b"x", "a.bin").status_code == 401  # another run's token
    assert put(client, 999_999, headers_a, b"x", "a.bin").status_code == 404
    assert stored_files(tmp_path) == []


def test_an_ended_runs_token_uploads_nothing(client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0},
                       headers=headers).status_code == 200
    assert put(client, run_id, headers, b"x", "late.bin").status_code == 401


@pytest.mark.parametrize("name", ["../escape.bin", "a/b.bin", ".hidden", "..", "x..y",
                                  "back\\slash", "", "a" * 129, "sp ace", "<script>.bin"])
def test_bad_names_are_refused_with_a_reason(client: TestClient, tmp_path: Path,
                                             name: str) -> None:
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, b"x", name)
    assert reply.status_code == 422, reply.text
    assert "name" in reply.text
    assert stored_files(tmp_path) == []


def test_an_unknown_kind_is_refused(client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert put(client, run_id, headers, b"x", "a.bin", kind="weights").status_code == 422


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize("members", [
    [_member("ckpt/../../etc/passwd")],
    [_member("/abs/file")],
    [_member("ckpt", tarfile.DIRTYPE), _member("ckpt/link", tarfile.SYMTYPE, "/etc/passwd")],
    [_member("ckpt/hard", tarfile.LNKTYPE, "ckpt/other")],
])
def test_unsafe_tars_are_refused_and_not_kept(client: TestClient, tmp_path: Path,
                                              members: list[tarfile.TarInfo]) -> None:
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, tar_bytes(members), "checkpoint-1.tar", "checkpoint", 1)
    assert reply.status_code == 422, reply.text
    assert stored_files(tmp_path) == []
    assert client.get(UP.format(run_id)).json() == []


def test_a_tar_name_must_hold_a_tar(client: TestClient, tmp_path: Path) -> None:
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, b"not a tar at all" * 100, "checkpoint-1.tar")
    assert reply.status_code == 422 and "tar" in reply.json()["detail"]
    good = tar_bytes([_member("checkpoint-1", tarfile.DIRTYPE), _member("checkpoint-1/w.bin")])
    assert put(client, run_id, headers, good, "checkpoint-1.tar").status_code == 201


@pytest.fixture
def small_cap(app_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GRPODECK_ARTIFACT_MAX_BYTES", "1000")
    config_module.get_settings.cache_clear()
    yield
    config_module.get_settings.cache_clear()


def test_uploads_past_the_size_cap_are_413_declared_or_streamed(
        small_cap: None, client: TestClient, tmp_path: Path) -> None:
    run_id, headers = running_run(client)
    assert put(client, run_id, headers, b"x" * 1000, "fits.bin").status_code == 201
    declared = put(client, run_id, headers, b"x" * 1001, "big.bin")
    assert declared.status_code == 413 and "larger than" in declared.json()["detail"]

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
        for _ in range(20):
            yield b"y" * 100

    streamed = client.post(UP.format(run_id), params={"name": "big2.bin"}, content=chunked(),
                           headers=headers)
    assert streamed.status_code == 413, streamed.text
    assert [a["name"] for a in client.get(UP.format(run_id)).json()] == ["fits.bin"]
    assert len(stored_files(tmp_path)) == 1  # no partial file left


def test_retention_keeps_the_newest_checkpoints(app_db: str, client: TestClient, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_ARTIFACT_KEEP", "2")
    config_module.get_settings.cache_clear()
    run_id, headers = running_run(client)
    for step in (1, 3, 2):  # uploaded out of order: the step decides, not the arrival
        assert put(client, run_id, headers, b"w" * step, f"ckpt-{step}.bin", "checkpoint",
                   step).status_code == 201
    assert put(client, run_id, headers, b"final", "final.bin", "model", 3).status_code == 201
    listed = client.get(UP.format(run_id)).json()
    assert sorted((a["name"], a["step"]) for a in listed) == [
        ("ckpt-2.bin", 2), ("ckpt-3.bin", 3), ("final.bin", 3)]
    assert len(stored_files(tmp_path)) == 3  # the dropped checkpoint's file went too


def test_deleting_a_run_deletes_its_artifacts(client: TestClient, tmp_path: Path) -> None:
    run_id, headers = running_run(client)
    other_id, other_headers = running_run(client)
    assert put(client, run_id, headers, b"abc", "a.bin").status_code == 201
    assert put(client, other_id, other_headers, b"def", "b.bin").status_code == 201
    assert client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0},
                       headers=headers).status_code == 200
    assert client.delete(f"/api/runs/{run_id}").status_code == 204
    assert client.get(UP.format(run_id)).status_code == 404
    assert [p.read_bytes() for p in stored_files(tmp_path)] == [b"def"]  # the other run's stays


def test_missing_artifacts_and_runs_are_404(client: TestClient) -> None:
    run_id, headers = running_run(client)
    other_id, _ = running_run(client)
    artifact = put(client, run_id, headers, b"abc", "a.bin").json()
    assert client.get(f"/api/runs/{other_id}/artifacts/{artifact['id']}/file").status_code == 404
    assert client.get(f"/api/runs/{run_id}/artifacts/999999/file").status_code == 404
    assert client.get(f"/api/runs/{run_id}/artifacts/{2**40}/file").status_code == 404
    assert client.get("/api/runs/999999/artifacts").status_code == 404


def test_reading_needs_a_login_and_deleting_needs_the_owner(client: TestClient,
                                                             tmp_path: Path) -> None:
    owner_id = make_user("owner@example.com")
    make_user("other@example.com")
    owner, other = api_key("owner@example.com"), api_key("other@example.com")
    with get_sessionmaker()() as db:
        run, ticket = service.create_run(db, spec=RunSpec.model_validate(SPEC),
                                         created_by=owner_id)
        db.commit()
        run_id = run.id
    headers = claim(client, run_id, ticket)
    artifact = put(client, run_id, headers, b"secret weights", "w.bin").json()
    file_url = artifact["url"]
    assert client.get(UP.format(run_id)).status_code == 401  # accounts exist: log in first
    assert client.get(file_url).status_code == 401
    assert client.get(file_url, headers=other).content == b"secret weights"  # any user reads
    gone = f"/api/runs/{run_id}/artifacts/{artifact['id']}"
    assert client.delete(gone, headers=other).status_code == 403
    assert client.delete(gone, headers=owner).status_code == 204
    assert client.get(file_url, headers=owner).status_code == 404
    assert stored_files(tmp_path) == []


def test_the_artifacts_tab_lists_them_and_the_run_page_links_it(client: TestClient) -> None:
    run_id, headers = running_run(client)
    assert put(client, run_id, headers, b"z" * 3 * 1024 * 1024, "checkpoint-7.tar.bin",
               "checkpoint", 7).status_code == 201
    assert 'id="artifacts-link"' in client.get(f"/runs/{run_id}").text
    page = client.get(f"/runs/{run_id}/artifacts").text
    assert "checkpoint-7.tar.bin" in page and "3 MiB" in page and ">7<" in page
    assert f'href="/api/runs/{run_id}/artifacts/' in page
