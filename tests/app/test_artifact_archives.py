"""Artifact checks by content and by quota (issue 33): a hostile archive is refused whatever it
is called (``ckpt.tgz``, ``ckpt.TAR``, ``weights.bin``, a zip), devices, FIFOs and sparse
members are refused, an archive whose members inflate past the cap is refused without being
extracted, and a run or a user past their artifact quota gets a 413 that says which."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from app.core.db import get_sessionmaker
from app.runs.models import Run
from tests.app.conftest import running_run
from tests.app.test_artifacts import _member, put, stored_files, tar_bytes
from tests.app.test_auth import make_user

HOSTILE = tar_bytes([_member("ckpt/../../etc/cron.d/x")])


def sparse_tar(real_size: int) -> bytes:
    """A GNU tar of about 1.5 KB whose one member is a sparse file of ``real_size`` bytes."""
    info = tarfile.TarInfo("ckpt/huge.bin")
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 512
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header[386:398] = b"%011o\0" % 0  # one data region: offset 0 ...
    header[398:410] = b"%011o\0" % 512  # ... 512 bytes long
    header[483:495] = b"%011o\0" % real_size  # the file's real size
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header) + b"\0" * 512 + b"\0" * 1024


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


@pytest.mark.parametrize(("body", "name"), [
    (gzipped(HOSTILE), "ckpt.tgz"),
    (HOSTILE, "ckpt.TAR"),
    (HOSTILE, "weights.bin"),
    (gzipped(HOSTILE), "weights.bin.gz"),
    (lzma.compress(HOSTILE), "ckpt.tar.xz"),
    (bz2.compress(HOSTILE), "ckpt.tbz2"),
])
def test_a_hostile_tar_is_refused_whatever_its_name(client: TestClient, tmp_path: Path,
                                                    body: bytes, name: str) -> None:
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, body, name)
    assert reply.status_code == 422 and "outside its folder" in reply.text, reply.text
    assert stored_files(tmp_path) == []


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_device_and_fifo_members_are_refused(client: TestClient, tmp_path: Path,
                                             kind: bytes) -> None:
    run_id, headers = running_run(client)
    members = [_member("ckpt", tarfile.DIRTYPE), _member("ckpt/dev", kind)]
    reply = put(client, run_id, headers, tar_bytes(members), "checkpoint-1.tar", "checkpoint", 1)
    assert reply.status_code == 422 and "special file" in reply.text, reply.text
    assert stored_files(tmp_path) == []


def test_a_small_tar_with_a_huge_sparse_member_is_refused(client: TestClient,
                                                          tmp_path: Path) -> None:
    body = sparse_tar(2**30)
    assert len(body) < 10_000
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:  # it is what it claims to be
        assert [(m.name, m.size, m.issparse()) for m in tar] == [("ckpt/huge.bin", 2**30, True)]
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, body, "checkpoint-1.tar", "checkpoint", 1)
    assert reply.status_code == 422 and "sparse" in reply.text, reply.text
    assert stored_files(tmp_path) == []


def test_a_zip_with_a_member_outside_its_folder_is_refused(client: TestClient) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../../home/u/.bashrc", "echo owned")
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, buffer.getvalue(), "model.safetensors")
    assert reply.status_code == 422 and "outside its folder" in reply.text, reply.text


@pytest.fixture
def settings_env(app_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield monkeypatch
    config_module.get_settings.cache_clear()


def _set(monkeypatch: pytest.MonkeyPatch, **env: int) -> None:
    for key, value in env.items():
        monkeypatch.setenv(f"GRPODECK_{key.upper()}", str(value))
    config_module.get_settings.cache_clear()


def test_a_compressed_tar_inflating_past_the_cap_is_refused(
        settings_env: pytest.MonkeyPatch, client: TestClient, tmp_path: Path) -> None:
    _set(settings_env, artifact_max_bytes=10_000)
    bomb = gzipped(tar_bytes([_member("ckpt/zeros.bin")], data=b"\0" * 1_000_000))
    assert len(bomb) < 10_000
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, bomb, "ckpt.tgz")
    assert reply.status_code == 422 and "add up to more than" in reply.text, reply.text
    safe = gzipped(tar_bytes([_member("ckpt/w.bin")], data=b"w" * 5_000))
    assert put(client, run_id, headers, safe, "ckpt.tgz").status_code == 201


def test_a_run_past_its_quota_gets_a_413_that_says_so(
        settings_env: pytest.MonkeyPatch, client: TestClient, tmp_path: Path) -> None:
    _set(settings_env, artifact_run_quota_bytes=2_500)
    run_id, headers = running_run(client)
    assert put(client, run_id, headers, b"a" * 1_000, "a.bin").status_code == 201
    assert put(client, run_id, headers, b"b" * 1_000, "b.bin").status_code == 201
    over = put(client, run_id, headers, b"c" * 1_000, "c.bin")
    assert over.status_code == 413, over.text
    assert "GRPODECK_ARTIFACT_RUN_QUOTA_BYTES" in over.json()["detail"]
    assert f"run {run_id} already stores 2000 bytes" in over.json()["detail"]
    assert put(client, run_id, headers, b"a" * 1_400, "a.bin").status_code == 201  # replaces
    other_id, other_headers = running_run(client)
    assert put(client, other_id, other_headers, b"d" * 1_000, "d.bin").status_code == 201
    assert len(stored_files(tmp_path)) == 3


def test_a_user_past_their_quota_gets_a_413_that_says_so(
        settings_env: pytest.MonkeyPatch, client: TestClient, tmp_path: Path) -> None:
    _set(settings_env, artifact_user_quota_bytes=2_500)
    runs = [running_run(client) for _ in range(3)]
    owner, stranger = make_user("quota@example.com"), make_user("other@example.com")
    with get_sessionmaker()() as db:
        for (run_id, _), user in zip(runs, (owner, owner, stranger), strict=True):
            db.get(Run, run_id).created_by_id = user  # type: ignore[union-attr]
        db.commit()
    (first, h1), (second, h2), (third, h3) = runs
    assert put(client, first, h1, b"a" * 2_000, "a.bin").status_code == 201
    over = put(client, second, h2, b"b" * 1_000, "b.bin")
    assert over.status_code == 413 and "GRPODECK_ARTIFACT_USER_QUOTA_BYTES" in over.text
    assert put(client, second, h2, b"b" * 500, "b.bin").status_code == 201
    assert put(client, third, h3, b"c" * 2_000, "c.bin").status_code == 201  # another user
