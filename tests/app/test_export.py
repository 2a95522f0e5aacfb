"""Exporting a run's rows (issue 56, item 4): ``GET /api/runs/{id}/export?format=jsonl|csv``
and ``grpodeck export`` write every stored row, settled and still waiting, NaN/inf kept as
their text; the file is what ``grpodeck diagnose`` reads back, and its diagnosis is the run's
own findings and verdict: the docs' promise ("an ended run's stored findings equal
``grpodeck diagnose`` of its exported rows") as one command. The runs are
``tests/app/test_one_diagnosis.py``'s, reported through the API and imported."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.core.db import get_sessionmaker
from app.importers.detect import load_log
from app.metrics import rollups
from app.runs.service import get_run_for_update
from tests.app.conftest import running_run
from tests.app.test_one_diagnosis import Row, _post, collapsing_run

FORMATS = ("jsonl", "csv")


def settle(run_id: int) -> None:
    """Spread the run's inbox into its points now (what the settler does within a second)."""
    with get_sessionmaker()() as db:
        run = get_run_for_update(db, run_id)
        assert run is not None
        rollups.settle(db, run)
        db.commit()


def odd_rows(n: int) -> list[Row]:
    """A collapsing run with NaN/inf losses, an eval reward every 50 steps only (empty cells)
    and a name a CSV must quote."""
    rows = collapsing_run(n, 0.4, 5)
    for step, metrics in rows:
        metrics["loss"] = {100: math.nan, 200: math.inf, 300: -math.inf}.get(step, 0.01)
        if step % 50 == 0:
            metrics["eval_reward"] = 0.3 + step / 10_000
        metrics['rewards/format, "strict"/mean'] = 0.5
    return rows


def same_rows(got: list[Row], want: list[Row]) -> None:
    assert [s for s, _ in got] == [s for s, _ in want]
    for (step, a), (_, b) in zip(got, want, strict=True):
        assert a.keys() == b.keys(), step
        for name, value in b.items():
            assert (math.isnan(value) and math.isnan(a[name])) or a[name] == value, (step, name)


def exported(client: TestClient, run_id: int, fmt: str, tmp_path: Path) -> Path:
    reply = client.get(f"/api/runs/{run_id}/export", params={"format": fmt})
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-disposition"] == (
        f'attachment; filename="run-{run_id}-api-run.{fmt}"')
    path = tmp_path / f"run-{run_id}.{fmt}"
    path.write_bytes(reply.content)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_export_holds_every_row_settled_and_waiting(
        client: TestClient, tmp_path: Path, fmt: str) -> None:
    rows = odd_rows(900)
    run_id, headers = running_run(client, max_steps=900)
    for start in range(0, 600, 200):
        _post(client, run_id, headers, rows[start:start + 200])
    settle(run_id)
    resent = (500, {**rows[499][1], "reward": 9.5})  # a re-sent step, still waiting: it wins
    _post(client, run_id, headers, [*rows[600:], resent])
    want = [resent if step == 500 else (step, m) for step, m in rows]
    log = load_log(exported(client, run_id, fmt, tmp_path))  # what every reader reads
    same_rows(log.rows, want)
    assert log.renames == {}  # the names come back as the run holds them


def test_the_csv_has_a_column_per_metric_and_nan_as_text(client: TestClient) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, [(1, {"reward": 0.5, "loss": math.nan}),
                                     (2, {"reward": math.inf, "kl": 1e-05})])
    text = client.get(f"/api/runs/{run_id}/export?format=csv").text
    assert text == "step,kl,loss,reward\n1,,nan,0.5\n2,1e-05,,inf\n"
    lines = client.get(f"/api/runs/{run_id}/export").text.splitlines()  # jsonl by default
    assert [json.loads(line) for line in lines] == [
        {"step": 1, "loss": "nan", "reward": 0.5}, {"step": 2, "kl": 1e-05, "reward": "inf"}]


def test_steps_far_apart_are_exported_without_walking_the_gap(client: TestClient) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, [(0, {"reward": 0.1}), (2**31 - 2, {"reward": 0.2})])
    settle(run_id)
    _post(client, run_id, headers, [(2**30, {"reward": 0.3})])
    lines = client.get(f"/api/runs/{run_id}/export").text.splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 2**30, 2**31 - 2]


def test_an_unknown_run_or_format_is_refused(client: TestClient) -> None:
    assert client.get("/api/runs/999/export").status_code == 404
    run_id, _ = running_run(client)
    assert client.get(f"/api/runs/{run_id}/export?format=xlsx").status_code == 422


def diagnosed(path: Path, *extra: str) -> dict[str, Any]:
    done = CliRunner().invoke(cli, ["diagnose", "--json", str(path), *extra])
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def live_findings(client: TestClient, run_id: int) -> dict[str, Any]:
    reply = client.get(f"/api/runs/{run_id}/findings")
    assert reply.status_code == 200, reply.text
    return reply.json()


def assert_same_diagnosis(run: dict[str, Any], file: dict[str, Any]) -> None:
    """The verdict, and each finding's category, metric, severity, onset and key numbers."""
    def key(f: dict[str, Any]) -> tuple:
        return f["category"], f["metric"] or "", f["severity"], f["first_step"], f["last_step"]

    def numbers(f: dict[str, Any]) -> dict[str, float]:
        return {k: float(v) for k, v in f["evidence"].items()
                if isinstance(v, int | float) and not isinstance(v, bool)}
    assert file["verdict"] == run["verdict"]
    assert sorted(map(key, file["findings"])) == sorted(map(key, run["findings"]))
    by_key = {key(f): f for f in run["findings"]}
    for f in file["findings"]:
        assert numbers(f) == pytest.approx(numbers(by_key[key(f)]), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("fmt", FORMATS)
def test_diagnose_of_the_export_is_the_runs_own_diagnosis(
        client: TestClient, tmp_path: Path, fmt: str) -> None:
    rows = collapsing_run(1200, 0.4, 7)
    run_id, headers = running_run(client, max_steps=1200)
    for start in range(0, 1200, 300):
        _post(client, run_id, headers, rows[start:start + 300])
    reply = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert reply.status_code == 200, reply.text
    run = live_findings(client, run_id)
    assert {"reward_collapse", "entropy_collapse", "kl_blowup"} <= {
        f["category"] for f in run["findings"]}  # not a vacuous comparison
    cap = client.get(f"/api/runs/{run_id}").json()["spec"]["max_completion_length"]
    file = diagnosed(exported(client, run_id, fmt, tmp_path),
                     "--max-completion-length", str(cap))
    assert_same_diagnosis(run, file)


def test_diagnose_of_an_imported_runs_export_is_its_own_diagnosis(
        client: TestClient, tmp_path: Path) -> None:
    rows = collapsing_run(900, 0.4, 3)
    body = "\n".join(json.dumps({"step": s, **m}) for s, m in rows)
    reply = client.post("/api/imports", files={"log": ("run.jsonl", body.encode())},
                        data={"name": "api-run"})
    assert reply.status_code == 201, reply.text
    run_id = int(reply.json()["runs"][0]["id"])
    assert_same_diagnosis(live_findings(client, run_id),
                          diagnosed(exported(client, run_id, "jsonl", tmp_path)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_grpodeck_export_reads_the_local_database(
        client: TestClient, tmp_path: Path, fmt: str) -> None:
    run_id, headers = running_run(client)
    _post(client, run_id, headers, odd_rows(120))
    api = client.get(f"/api/runs/{run_id}/export", params={"format": fmt}).content
    out = tmp_path / f"out.{fmt}"
    done = CliRunner().invoke(cli, ["export", str(run_id), "--format", fmt, "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert out.read_bytes() == api
    assert f"exported run {run_id}" in done.output and "120 rows" in done.output
    to_stdout = CliRunner().invoke(cli, ["export", str(run_id), "--format", fmt])
    assert to_stdout.exit_code == 0 and to_stdout.stdout.encode() == api


def test_grpodeck_export_of_a_run_that_is_not_there(client: TestClient) -> None:
    done = CliRunner().invoke(cli, ["export", "999"])
    assert done.exit_code == 2 and "run 999 not found" in done.output
