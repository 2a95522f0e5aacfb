"""Issue 32 on the upload paths: a repeated ``map`` field is one pair per item, folders of
TensorBoard events or MLflow runs arrive as zip or tar.gz archives, a notebook goes through the
form, and a too-deep JSON document is a 400, not a 500."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

from fastapi.testclient import TestClient

from bench.simulated_logs import ODD_KEYS, handwritten_stalled
from tests.importers.test_readers import (
    collapsing,
    healthy,
    write_notebook,
    write_tensorboard,
)


def metric_names(client: TestClient, run_id: int) -> set[str]:
    return set(client.get(f"/api/runs/{run_id}/metrics").json())


def test_a_repeated_map_field_stores_each_mapped_name(client: TestClient) -> None:
    """What ``grpodeck import --url ... --map Score=reward --map Div=kl`` sends."""
    reply = client.post("/api/imports", files={"log": ("loop.log", handwritten_stalled(
        keys=ODD_KEYS).encode())}, data={"map": ["Score=reward", "Div=kl", "Obj=loss"]})
    assert reply.status_code == 201, reply.text
    [run] = reply.json()["runs"]
    assert metric_names(client, run["id"]) == {"reward", "kl", "loss"}
    assert run["verdict"] == "warning"  # the stall is found once the reward is read
    spec = client.get(f"/api/runs/{run['id']}").json()["spec"]
    assert spec["mapping"] == "Div=kl, Obj=loss, Score=reward"
    assert spec["read_as"] == "`Div` as kl, `Obj` as loss, `Score` as reward"


def test_one_map_item_may_hold_several_pairs(client: TestClient) -> None:
    reply = client.post("/api/imports", files={"log": ("loop.log", handwritten_stalled(
        keys=ODD_KEYS).encode())}, data={"map": ["Score=reward, Div=kl"]})
    assert reply.status_code == 201, reply.text
    assert metric_names(client, reply.json()["runs"][0]["id"]) == {"reward", "kl", "Obj"}


def test_a_deep_json_upload_is_a_400_and_stores_nothing(client: TestClient) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    reply = client.post("/api/imports", files={"log": ("deep.json", deep)})
    assert reply.status_code == 400, reply.text
    assert "nested deeper than 200 levels" in reply.json()["detail"]
    page = client.post("/runs/import", files={"log": ("deep.json", deep)})
    assert page.status_code == 422 and "nested deeper" in page.text
    assert client.get("/api/runs").json() == []


def _zip(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(folder.parent).as_posix())
    return buffer.getvalue()


def test_a_zipped_tensorboard_folder_is_imported(client: TestClient, tmp_path: Path) -> None:
    write_tensorboard(tmp_path / "tb-run" / "Dec02_host", collapsing())
    reply = client.post("/api/imports", files={
        "archive": ("tb-run.zip", _zip(tmp_path / "tb-run"), "application/zip")})
    assert reply.status_code == 201, reply.text
    [run] = reply.json()["runs"]
    assert run["name"] == "tb-run" and run["verdict"] == "critical"
    findings = client.get(f"/api/runs/{run['id']}/findings").json()["findings"]
    assert "reward_collapse" in {f["category"] for f in findings}


def test_a_zip_reaching_outside_its_folder_is_refused(client: TestClient) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../../escaped.txt", "x")
    reply = client.post("/api/imports", files={"archive": ("bad.zip", buffer.getvalue())})
    assert reply.status_code == 422 and "outside the archive" in reply.json()["detail"]


def test_a_tarred_mlruns_store_is_imported(client: TestClient, tmp_path: Path) -> None:
    run = tmp_path / "mlruns" / "0" / "8ddc609d89064c07acc415ca1a78430f"
    (run / "metrics" / "completions").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_name: grpo-healthy\nexperiment_id: '0'\n")
    for name in ("reward", "reward_std", "kl", "entropy", "completions/mean_length"):
        (run / "metrics" / name).write_text("".join(
            f"{1796204205352 + step} {metrics[name]} {step}\n" for step, metrics in healthy()))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(tmp_path / "mlruns", arcname="mlruns")
    reply = client.post("/api/imports", files={"archive": ("mlruns.tar.gz", buffer.getvalue())})
    assert reply.status_code == 201, reply.text
    assert reply.json()["runs"][0]["verdict"] == "healthy"


def test_a_notebook_goes_through_the_form(client: TestClient, tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "colab.ipynb", collapsing())
    page = client.post("/runs/import", files={"log": ("colab.ipynb", path.read_bytes())},
                       follow_redirects=False)
    assert page.status_code == 303, page.text
    run = client.get(f"/api/runs/{page.headers['location'].rsplit('/', 1)[1]}").json()
    assert run["name"] == "colab" and run["spec"]["source_format"] == "notebook (table)"
    assert "`Training Loss` as loss" in run["spec"]["read_as"]


def _upload_loop(client: TestClient, filename: str, **data: object) -> dict:
    reply = client.post("/api/imports", files={"log": (filename, handwritten_stalled(
        keys=ODD_KEYS).encode())}, data=data)
    assert reply.status_code == 201, reply.text
    [run] = reply.json()["runs"]  # id, verdict
    return {**run, "spec": client.get(f"/api/runs/{run['id']}").json()["spec"]}


def test_a_saved_mapping_is_reused_for_the_next_log_of_that_source(client: TestClient) -> None:
    first = _upload_loop(client, "loop.log", map=["Score=reward", "Div=kl"], save_map="true")
    assert "mapping_saved_for" not in first["spec"]  # given, not reused
    again = _upload_loop(client, "loop.log")  # the next run's log: no map sent
    assert again["verdict"] == "warning" and again["spec"]["mapping_saved_for"] == "loop.log"
    assert metric_names(client, again["id"]) == {"reward", "kl", "Obj"}
    other = _upload_loop(client, "other.log")  # another source: nothing remembered
    assert other["verdict"] == "unknown" and other["suggested_map"] == "--map Score=reward"
    given = _upload_loop(client, "loop.log", map=["Obj=reward"])  # a given map wins
    assert metric_names(client, given["id"]) == {"reward", "Score", "Div"}


def test_the_import_form_remembers_a_mapping(client: TestClient) -> None:
    log = handwritten_stalled(keys=ODD_KEYS).encode()
    page = client.post("/runs/import", files={"log": ("train.log", log)},
                       data={"map": "Score=reward, Div=kl", "save_map": "true"},
                       follow_redirects=False)
    assert page.status_code == 303, page.text
    page = client.post("/runs/import", files={"log": ("train.log", log)}, follow_redirects=False)
    run_id = page.headers["location"].rsplit("/", 1)[1]
    assert client.get(f"/api/runs/{run_id}/findings").json()["verdict"] == "warning"
    assert client.get(f"/api/runs/{run_id}").json()["spec"]["mapping"] == "Div=kl, Score=reward"
    assert 'name="save_map"' in client.get("/runs/import").text


def _loop_jsonl(steps: int = 30) -> bytes:
    """Issue 54's log: the step under ``t``, no TRL name, an eval accuracy every 10 steps."""
    return "".join(json.dumps({"t": 5 * s, "rollout_reward_mean": 0.2 + 0.01 * s,
                               "rollout_reward_max": 1.0, "rollout_reward_std": 0.3,
                               "gradient_norm": 0.5, "mean_response_length": 200.0,
                               "val_accuracy": 0.5 if s % 10 == 0 else None}) + "\n"
                   for s in range(1, steps + 1)).encode()


def test_an_import_reads_inferred_names_and_a_saved_step_key(client: TestClient) -> None:
    """Issue 54 through the upload API: the names a log's words infer are stored and listed as
    read, ``t=step`` places the rows, and a saved mapping (the step key with a reward the user
    chose over the inferred one) is what the next log of that name is read with."""
    reply = client.post("/api/imports", files={"log": ("loop.jsonl", _loop_jsonl())},
                        data={"map": ["t=step", "rollout_reward_max=reward"],
                              "save_map": "true"})
    assert reply.status_code == 201, reply.text
    again = client.post("/api/imports", files={"log": ("loop.jsonl", _loop_jsonl())})
    assert again.status_code == 201, again.text
    run = client.get(f"/api/runs/{again.json()['runs'][0]['id']}").json()
    assert run["step"] == 150 and run["spec"]["mapping_saved_for"] == "loop.jsonl"
    series = client.get(f"/api/runs/{run['id']}/metrics").json()
    assert series["reward"]["values"] == [1.0] * 30  # the user's choice, not the inferred one
    assert {"reward_std", "grad_norm", "completions/mean_length", "eval_reward",
            "rollout_reward_mean"} <= set(series)
    fresh = client.post("/api/imports", files={"log": ("other.jsonl", _loop_jsonl())},
                        data={"map": ["t=step"]})
    spec = client.get(f"/api/runs/{fresh.json()['runs'][0]['id']}").json()["spec"]
    assert "`rollout_reward_mean` as reward" in spec["read_as"]
    assert "`val_accuracy` as eval_reward" in spec["read_as"]
