"""A refusal names the user's own member or path, never the server's (issue 55): an import
archive's member refused for traversal said "'../x' would be extracted to
'/tmp/tmpab12cd34/x', which is outside the destination": the server's temporary folder."""

from __future__ import annotations

import io
import tarfile
import tempfile

import pytest
from fastapi.testclient import TestClient

from app.core.errors import without_server_paths
from tests.app.conftest import running_run
from tests.app.test_artifacts import put

SERVER_TEMP = tempfile.gettempdir()


def tar_gz(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        if kind == tarfile.REGTYPE:
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        else:
            tar.addfile(info)
    return buffer.getvalue()


@pytest.mark.one_backend
@pytest.mark.parametrize(("member", "kind", "link"), [
    ("../x", tarfile.REGTYPE, ""),
    ("run/../../x", tarfile.REGTYPE, ""),
    ("run/l", tarfile.SYMTYPE, "../../x"),
    ("run/h", tarfile.LNKTYPE, "../../x"),
])
def test_an_import_member_refused_for_traversal_names_no_server_path(
        client: TestClient, member: str, kind: bytes, link: str) -> None:
    reply = client.post("/api/imports", files={
        "archive": ("run.tar.gz", tar_gz(member, kind, link), "application/gzip")})
    assert reply.status_code == 422, reply.text
    detail = reply.json()["detail"]
    assert member in detail, detail
    assert SERVER_TEMP not in detail, detail


@pytest.mark.one_backend
def test_an_artifact_member_refused_for_traversal_names_no_server_path(
        client: TestClient) -> None:
    run_id, headers = running_run(client)
    reply = put(client, run_id, headers, tar_gz("../../etc/x"), "ckpt.tgz")
    assert reply.status_code == 422 and "'../../etc/x'" in reply.text, reply.text
    assert SERVER_TEMP not in reply.text and "artifacts" not in reply.json()["detail"]


def test_a_request_temp_folder_quoted_from_an_exception_is_cut() -> None:
    """Any refusal (``LogFormatError``, an ``HTTPException``'s detail) passes through here:
    "could not read the upload ({exc})" quoted an OSError naming the unpacked folder."""
    with tempfile.TemporaryDirectory() as tmp:
        quoted = f"could not read the upload ([Errno 28] No space left: '{tmp}/unpacked/a.json')"
        assert without_server_paths(quoted) == (
            "could not read the upload ([Errno 28] No space left: '…/unpacked/a.json')")
    own = f"dataset '{SERVER_TEMP}/my-data/tmpdata1.jsonl' not found"  # the user's own path
    assert without_server_paths(own) == own
