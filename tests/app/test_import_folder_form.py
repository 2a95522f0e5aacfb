"""The import form's folder field in-process (issue 56; the browser itself is
tests/e2e/test_import_folder_in_browser.py): a folder is bounded as an archive is. Its files'
paths stay inside it, and a folder of more than the form parser's default 1,000 files (an
``mlruns/`` store holds a file per metric per run) is read like an archive of as many."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.importers.test_readers import healthy, write_tensorboard


def _folder(root: Path) -> list[tuple[str, tuple[str, bytes]]]:
    """The form's ``folder`` parts as a browser sends them: each file by its path inside."""
    return [("folder", (p.relative_to(root.parent).as_posix(), p.read_bytes()))
            for p in sorted(root.rglob("*")) if p.is_file()]


def test_a_folder_of_many_files_is_imported(client: TestClient, tmp_path: Path) -> None:
    run = write_tensorboard(tmp_path / "qwen-math" / "Dec02_host", healthy(5))
    notes = run.parent / "notes"
    notes.mkdir()
    for i in range(1_200):
        (notes / f"sample_{i}.txt").write_text("x")
    reply = client.post("/runs/import", files=_folder(tmp_path / "qwen-math"),
                        follow_redirects=False)
    assert reply.status_code == 303, reply.text[-500:]
    [imported] = client.get("/api/runs").json()
    assert imported["name"] == "qwen-math"


def test_a_folder_file_whose_path_leaves_the_folder_is_refused(client: TestClient,
                                                               tmp_path: Path) -> None:
    for name in ("../../escaped.log", "/etc/escaped.log", "runs//x.log", "runs/./x.log"):
        reply = client.post("/runs/import", files=[("folder", (name, b"step: 1 reward: 0.1"))])
        assert reply.status_code == 422 and "is no path inside the folder" in reply.text, name
    assert not (tmp_path.parent / "escaped.log").exists()
    assert client.get("/api/runs").json() == []


def test_a_file_and_a_folder_together_are_refused(client: TestClient, tmp_path: Path) -> None:
    run = write_tensorboard(tmp_path / "tb-run", healthy(5))
    reply = client.post("/runs/import", files=[*_folder(run), ("log", ("x.log", b"loss: 1"))])
    assert reply.status_code == 422 and "one of them" in reply.text
