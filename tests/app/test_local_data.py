"""Bug 4 (issue 7): local datasets and models come only from their configured directories, and
datasets get there through the upload form or API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from grpodeck.contract.catalog import OutsideDirectory
from tests.app.conftest import SPEC
from worker.paths import confine


@pytest.fixture
def dirs(client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Datasets and models directories under tmp_path; ``outside/`` next to them holds files a
    run must never read."""
    for name in ("datasets", "models", "outside"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("GRPODECK_DATASETS_DIR", str(tmp_path / "datasets"))
    monkeypatch.setenv("GRPODECK_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("GRPODECK_DATASET_UPLOAD_MAX_BYTES", "4096")
    config_module.get_settings.cache_clear()
    (tmp_path / "outside" / "secret.json").write_text(json.dumps({"prompt": "secret", "key": 1}))
    (tmp_path / "outside" / "model").mkdir()
    (tmp_path / "outside" / "model" / "config.json").write_text("{}")
    yield tmp_path
    config_module.get_settings.cache_clear()


def _launch_error(client: TestClient, field: str, value: str) -> str:
    response = client.post("/api/runs", json={**SPEC, field: value})
    assert response.status_code == 422, response.text
    [error] = [e for e in response.json()["detail"] if e["loc"][-1] == field]
    return error["msg"]


def _worker_refusal(ref: str, root: Path, kind: str) -> str:
    with pytest.raises(OutsideDirectory) as err:
        confine(ref, root, kind)
    return f"Value error, {err.value}"  # as pydantic words the same refusal at launch


def test_dataset_paths_outside_the_directory_are_refused_alike_whether_they_exist(
        client: TestClient, dirs: Path) -> None:
    """The web app refuses by the letters (absolute, ``..``); a symlink that leads out is only
    visible on the disk of the worker that reads it, which refuses it in the same words."""
    datasets = dirs / "datasets"
    (datasets / "out.jsonl").symlink_to(dirs / "outside" / "secret.json")
    (datasets / "dangling.jsonl").symlink_to(dirs / "outside" / "missing.json")
    (datasets / "up").symlink_to(dirs / "outside")
    existing = [str(dirs / "outside" / "secret.json"), "../outside/secret.json", "/etc/passwd"]
    missing = [str(dirs / "outside" / "nope.json"), "../outside/nope.json",
               "/etc/no-such-file-here", "../../x.json"]
    messages = {_launch_error(client, "dataset", ref) for ref in existing + missing}
    assert client.get("/api/runs").json() == []  # nothing stored, nothing queued
    linked = ["out.jsonl", "up/secret.json", "dangling.jsonl", "up/nope.json"]
    messages |= {_worker_refusal(ref, datasets, "dataset") for ref in existing + missing + linked}
    assert len(messages) == 1, messages
    [message] = messages
    assert "datasets directory" in message
    assert "not found" not in message and "exist" not in message and "secret" not in message


def test_model_paths_outside_the_directory_are_refused_alike_whether_they_exist(
        client: TestClient, dirs: Path) -> None:
    (dirs / "models" / "linked").symlink_to(dirs / "outside" / "model")
    refs = [str(dirs / "outside" / "model"), str(dirs / "outside" / "none"), "../outside/model",
            "../outside/none", "/etc", "/no/such/dir"]
    messages = {_launch_error(client, "model", ref) for ref in refs}
    messages |= {_worker_refusal(ref, dirs / "models", "model") for ref in [*refs, "linked"]}
    assert len(messages) == 1, messages
    assert "models directory" in messages.pop()


def test_form_marks_the_dataset_field_for_an_outside_path(client: TestClient, dirs: Path) -> None:
    form = {"name": "x", "model": "builtin:tiny-random", "dataset": "/etc/passwd",
            "reward_0_name": "length_target", "reward_0_params": "target=20"}
    page = client.post("/runs/new", data=form)
    assert page.status_code == 422
    assert 'id="e-dataset"' in page.text and "datasets directory" in page.text


def test_names_inside_the_directories_hub_ids_and_builtins_are_accepted(
        client: TestClient, dirs: Path) -> None:
    for model, dataset in [("builtin:tiny-random", "builtin:arithmetic"),
                           ("Qwen/Qwen2.5-0.5B-Instruct", "openai/gsm8k"),
                           ("my-model", "not-uploaded-yet.jsonl"),  # existence: the worker says
                           ("sub/m", "sub/p.json"), ("a/../m", "a/p.json")]:
        response = client.post("/api/runs", json={**SPEC, "model": model, "dataset": dataset})
        assert response.status_code == 201, (model, dataset, response.text)
    # An absolute path is refused even inside the directory: the web app cannot know where the
    # worker's directory is, so a spec names things relative to it.
    assert "datasets directory" in _launch_error(client, "dataset", str(dirs / "datasets" / "p.json"))
    # Dataset names are an allow-list of characters (issue 22): no "..", even one that stays in.
    assert "datasets directory" in _launch_error(client, "dataset", "a/../p.json")


def _upload(client: TestClient, filename: str, content: str | bytes, **data: str):  # type: ignore[no-untyped-def]
    return client.post("/api/datasets", files={"file": (filename, content)}, data=data)


def test_upload_stores_a_valid_dataset_that_the_launch_form_then_offers(
        client: TestClient, dirs: Path) -> None:
    rows = "".join(json.dumps({"prompt": f"Say {i}", "answer": str(i)}) + "\n" for i in range(8))
    response = _upload(client, "../../sneaky/my-prompts.jsonl", rows)
    assert response.status_code == 201, response.text
    assert response.json() == {"name": "my-prompts.jsonl", "rows": 8,
                               "columns": ["prompt", "answer"], "size_bytes": len(rows)}
    assert (dirs / "datasets" / "my-prompts.jsonl").read_text() == rows
    assert client.get("/api/datasets").json() == ["my-prompts.jsonl"]
    page = client.get("/runs/new?dataset=my-prompts.jsonl").text
    assert '<option value="my-prompts.jsonl">' in page
    assert 'id="f-dataset" list="datasets" value="my-prompts.jsonl"' in page
    assert client.post("/api/runs", json={**SPEC, "dataset": "my-prompts.jsonl"}).status_code == 201
    again = _upload(client, "my-prompts.jsonl", rows)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]
    assert (dirs / "datasets" / "my-prompts.jsonl").read_text() == rows


def test_a_json_list_of_chat_prompts_is_accepted_under_a_chosen_name(
        client: TestClient, dirs: Path) -> None:
    rows = [{"prompt": [{"role": "user", "content": "hi"}]}, {"prompt": [{"role": "user", "content": "yo"}]}]
    response = _upload(client, "whatever.json", json.dumps(rows), name="chat.json")
    assert response.status_code == 201 and response.json()["name"] == "chat.json"


@pytest.mark.parametrize("name,content,reason", [
    ("a.jsonl", '{"text": "hi"}\n', "row 1 needs a 'prompt'"),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": \n', "line 2 is not valid JSON"),
    ("a.jsonl", '{"prompt": "ok"}\n[1, 2]\n', "row 2 is not a JSON object"),
    ("a.jsonl", '{"prompt": "ok"}\n{"prompt": [{"role": "user", "content": "x"}]}\n', "mix of text"),
    ("a.jsonl", "", "no rows"),
    ("a.json", '[{"prompt": "x"', "not valid JSON"),
    ("a.csv", '{"prompt": "x"}\n', "must end in .jsonl or .json"),
    (".hidden.jsonl", '{"prompt": "x"}\n', "must end in .jsonl or .json"),
    ("a.jsonl", b'{"prompt": "\xff"}\n', "not UTF-8"),
])
def test_upload_refuses_what_the_trainer_could_not_use(
        client: TestClient, dirs: Path, name: str, content: str, reason: str) -> None:
    response = _upload(client, name, content)
    assert response.status_code == 422, response.text
    assert reason in response.json()["detail"]
    assert list((dirs / "datasets").iterdir()) == []


def test_upload_over_the_size_limit_is_refused(client: TestClient, dirs: Path) -> None:
    big = json.dumps({"prompt": "x" * 5000}) + "\n"
    response = _upload(client, "big.jsonl", big)
    assert response.status_code == 413 and "larger than 4096 bytes" in response.json()["detail"]
    huge = client.post("/api/datasets", content=b"x" * 200_000,
                       headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert huge.status_code == 413  # refused from the declared length, before parsing
    assert list((dirs / "datasets").iterdir()) == []


def test_upload_form_stores_and_links_to_the_launch_form(client: TestClient, dirs: Path) -> None:
    page = client.get("/datasets")
    assert page.status_code == 200 and 'id="upload-form"' in page.text
    ok = client.post("/datasets", files={"file": ("p.jsonl", '{"prompt": "<b>hi</b>"}\n')})
    assert ok.status_code == 201 and 'href="/runs/new?dataset=p.jsonl"' in ok.text
    assert "<code>p.jsonl</code>" in ok.text
    bad = client.post("/datasets", files={"file": ("q.jsonl", '{"x": 1}\n')})
    assert bad.status_code == 422 and 'id="upload-error"' in bad.text and "needs a" in bad.text
