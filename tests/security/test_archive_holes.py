"""Artifact archives the checks let through (issue 55): a zstd or lz4 compressed tar was
stored unchecked (its magic bytes were not known, so it was "not an archive") whatever its
members, and a second tar appended after the first one's end-of-archive blocks was never read
(GNU tar ``--ignore-zeros`` extracts it). Every accepted compression now goes through the
same member checks, and nothing but zeros may follow the end of the archive."""

from __future__ import annotations

import gzip
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from fastapi.testclient import TestClient

from tests.app.conftest import running_run
from tests.app.test_artifact_archives import sparse_tar
from tests.app.test_artifacts import _member, put, stored_files, tar_bytes

COMPRESSIONS: dict[str, Callable[[bytes], bytes]] = {
    "zstd": zstandard.ZstdCompressor().compress,
    "lz4": lz4.frame.compress,
    "plain": bytes,
    "gzip": lambda data: gzip.compress(data, mtime=0),
}
HOSTILE = {
    "traversal": (tar_bytes([_member("ckpt/../../x")]), "outside its folder"),
    "absolute": (tar_bytes([_member("/etc/cron.d/x")]), "outside its folder"),
    "symlink": (tar_bytes([_member("ckpt/s", tarfile.SYMTYPE, "/etc/shadow")]), "link"),
    "hardlink": (tar_bytes([_member("ckpt/h", tarfile.LNKTYPE, "/etc/shadow")]), "link"),
    "sparse": (sparse_tar(2**30), "sparse"),
}
SAFE = tar_bytes([_member("ckpt", tarfile.DIRTYPE), _member("ckpt/w.bin")], data=b"w" * 5_000)


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
@pytest.mark.parametrize("hole", list(HOSTILE))
def test_a_hostile_zstd_or_lz4_tar_is_refused(client: TestClient, tmp_path: Path,
                                              compression: str, hole: str) -> None:
    tar, says = HOSTILE[hole]
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, COMPRESSIONS[compression](tar), "ckpt.tar.zst")
    assert reply.status_code == 422 and says in reply.text, (reply.status_code, reply.text)
    assert stored_files(tmp_path) == []


@pytest.mark.one_backend
@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_a_second_tar_after_the_end_of_archive_is_refused(
        client: TestClient, tmp_path: Path, compression: str) -> None:
    appended = SAFE + tar_bytes([_member("ckpt/../../../home/u/.bashrc")])
    with tarfile.open(fileobj=__import__("io").BytesIO(appended)) as tar:  # what tar lists
        assert [m.name for m in tar] == ["ckpt", "ckpt/w.bin"]
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, COMPRESSIONS[compression](appended), "ckpt.bin")
    assert reply.status_code == 422 and "after the end of the archive" in reply.text, \
        (reply.status_code, reply.text)
    assert stored_files(tmp_path) == []


@pytest.mark.one_backend
def test_bytes_after_the_end_of_archive_are_refused_zeros_are_not(client: TestClient) -> None:
    run_id, headers = running_run(client)
    garbage = put(client, run_id, headers, SAFE + os.urandom(600), "ckpt.tar")
    assert garbage.status_code == 422 and "after the end of the archive" in garbage.text
    padded = put(client, run_id, headers, SAFE + bytes(20_480), "padded.tar")
    assert padded.status_code == 201, padded.text


@pytest.mark.one_backend
@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_a_safe_tar_and_a_compressed_file_are_stored(client: TestClient,
                                                     compression: str) -> None:
    run_id, headers = running_run(client)
    compress = COMPRESSIONS[compression]
    assert put(client, run_id, headers, compress(SAFE), "ckpt.tar.x").status_code == 201
    weights = put(client, run_id, headers, compress(os.urandom(4_000)), "weights.bin.x")
    assert weights.status_code == 201, weights.text


@pytest.mark.one_backend
@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_zstd_or_lz4_tar_inflating_past_the_cap_is_refused(
        client: TestClient, monkeypatch: pytest.MonkeyPatch, compression: str) -> None:
    from app.core import config as config_module

    monkeypatch.setenv("GRPODECK_ARTIFACT_MAX_BYTES", "10000")
    config_module.get_settings.cache_clear()
    bomb = COMPRESSIONS[compression](tar_bytes([_member("ckpt/zeros.bin")],
                                               data=bytes(1_000_000)))
    assert len(bomb) < 10_000
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, bomb, "ckpt.tar.zst")
    assert reply.status_code == 422 and "add up to more than" in reply.text, reply.text


@pytest.mark.one_backend
def test_a_header_tar_cannot_read_is_refused_with_what_follows(client: TestClient) -> None:
    """GNU tar skips a bad header ("Skipping to next header") and extracts what comes after."""
    bad = bytearray(tar_bytes([_member("ckpt/x")])[:512])
    bad[148:156] = b"0000000\0"  # a wrong checksum
    hostile = tar_bytes([_member("../../x")])
    body = SAFE[:6144] + bytes(bad) + hostile  # the two members, then the bad header
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, body, "ckpt.tar")
    assert reply.status_code == 422 and "unreadable tar header" in reply.text, reply.text


@pytest.mark.one_backend
@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_hostile_tar_behind_a_skippable_frame_is_refused(client: TestClient,
                                                           compression: str) -> None:
    skippable = (0x184D2A5A).to_bytes(4, "little") + (6).to_bytes(4, "little") + b"hidden"
    body = skippable + COMPRESSIONS[compression](HOSTILE["traversal"][0])
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, body, "ckpt.bin")
    assert reply.status_code == 422 and "outside its folder" in reply.text, reply.text


@pytest.mark.one_backend
def test_lz4s_legacy_format_is_refused_as_unchecked(client: TestClient) -> None:
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, b"\x02\x21\x4c\x18" + os.urandom(64), "ckpt.bin")
    assert reply.status_code == 422 and "legacy format" in reply.text, reply.text
