"""Never a 500 on upload (issue 32): ``POST /api/imports`` answers any bytes, sent as a log or
as a folder archive, with 201 (imported) or a clear 400/422 refusal. The same mutated logs as
tests/importers/test_fuzz_readers.py (real and generated logs, truncated, spliced, garbage,
huge lines, deep nesting, chat templates); bounded examples, derandomized."""

from __future__ import annotations

import io
import os
import tarfile

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.importers.mutations import ANY_BYTES, mutated

FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")), deadline=None,
                database=None, derandomize=True, suppress_health_check=list(HealthCheck))
ANSWERS = (201, 400, 413, 422)  # 413: an archive that unpacks past its cap
pytestmark = pytest.mark.one_backend  # the subject is the readers, not the storage


def _as_archive(files: dict[str, bytes]) -> bytes:
    """A tar.gz of a run folder holding each ``{name: content}``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(f"run/{name}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@FUZZ
@given(st.one_of(ANY_BYTES, mutated()), st.sampled_from(["log.txt", "run.ipynb", "h.csv",
                                                         "trainer_state.json", "x.tfevents"]))
@example(b"{{ '<|im_start|>assistant' }}\n", "train.log")
@example(b"[" * 100_000 + b"]" * 100_000, "deep.json")
def test_an_uploaded_log_is_imported_or_refused(client: TestClient, content: bytes,
                                                name: str) -> None:
    reply = client.post("/api/imports", files={"log": (name, content)},
                        data={"map": ["Score=reward", "KL_ref=kl"]})
    assert reply.status_code in ANSWERS, reply.text
    if reply.status_code != 201:
        assert isinstance(reply.json()["detail"], str) and reply.json()["detail"]


@FUZZ
@given(mutated(), st.sampled_from(["events.out.tfevents.1.host", "trainer_state.json",
                                   "0/abc/metrics/reward", "files/wandb-history.jsonl"]))
def test_an_uploaded_folder_archive_is_imported_or_refused(client: TestClient, content: bytes,
                                                           name: str) -> None:
    files = {name: content}
    if name.startswith("0/abc/"):  # an mlruns run folder is known by its meta.yaml
        files["0/abc/meta.yaml"] = b"run_name: x\n"
    archive = _as_archive(files)
    reply = client.post("/api/imports", files={"archive": ("run.tar.gz", archive)})
    assert reply.status_code in ANSWERS, reply.text
