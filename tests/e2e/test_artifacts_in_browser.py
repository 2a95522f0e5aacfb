"""A tiny launched run through the real worker and training child saves checkpoints; the worker
uploads them with the run token; they are listed (API and the Artifacts tab in a browser) and
download byte-identical to what the child wrote."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.stack import Stack


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder.parent)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _tar_files(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def test_a_launched_runs_checkpoints_are_listed_and_download_identical(page: Page,
                                                                        live: Stack) -> None:
    run_id = live.launch(name="<b>saving</b>-run", model="builtin:tiny-random",
                         dataset="builtin:short-prompts", num_generations=2, max_steps=2,
                         max_completion_length=8, save_steps=1,
                         rewards=[{"name": "length_target", "params": {"target": 5}}])
    assert live.wait_for(run_id, {"succeeded", "failed"})["status"] == "succeeded"
    listed = httpx.get(f"{live.url}/api/runs/{run_id}/artifacts", timeout=10).json()
    assert [(a["name"], a["kind"], a["step"]) for a in listed] == [
        ("checkpoint-1.tar", "checkpoint", 1), ("checkpoint-2.tar", "checkpoint", 2),
        ("final-model.tar", "model", 2), ("trainer_state.json", "trainer_state", 2)]
    out = live.workdir / "runs" / str(run_id)  # what the child saved on the worker's disk
    for artifact in listed:
        data = httpx.get(f"{live.url}{artifact['url']}", timeout=60).content
        assert len(data) == artifact["size"]
        assert hashlib.sha256(data).hexdigest() == artifact["sha256"]
        saved = out / artifact["name"].removesuffix(".tar")
        if saved.is_dir():
            assert _tar_files(data) == _files(saved), artifact["name"]
            assert any(name.endswith(".safetensors") for name in _tar_files(data))
        else:
            assert data == saved.read_bytes()

    page.goto(f"{live.url}/runs/{run_id}")
    page.click("#artifacts-link")
    page.wait_for_url(f"**/runs/{run_id}/artifacts")
    rows = page.locator("#artifacts tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.nth(1)).to_contain_text("checkpoint-2.tar")
    expect(rows.nth(1)).to_contain_text("checkpoint")
    expect(page.locator("h1")).to_contain_text("<b>saving</b>-run")  # shown as text, escaped
    with page.expect_download() as download:
        rows.nth(3).locator("a").click()
    path = download.value.path()
    assert download.value.suggested_filename == "trainer_state.json"
    assert Path(path).read_bytes() == (out / "trainer_state.json").read_bytes()
