"""One reading of metric keys on every path (issue 31), in-process on real SQLite and PostgreSQL:
a live run's batches (report API), the MLflow API, an import and ``grpodeck diagnose`` read
verl's names and a user's ``metric_map`` the same way, the run keeps its reading between
batches, and the run page lists what was read as what. The verl rows are the seeded simulation
of bench/simulated_logs.py (a task score that collapses after step 60)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
from fastapi.testclient import TestClient

from app.importers import keyvalue
from app.imports.service import diagnose_path
from app.metrics.reading import Reading, read_rows, vocabulary_names
from bench.simulated_logs import verl_collapse
from grpodeck.contract.wire import Vocabulary
from tests.app.conftest import html, one

VERL_LOG = verl_collapse()
API = "/mlflow/api/2.0/mlflow"


def verl_rows() -> list[tuple[int, dict[str, float]]]:
    """The simulated verl run's rows under verl's own names (parsed, not yet translated)."""
    return keyvalue.parse(VERL_LOG, "verl.log", verl=True).rows


def register(client: TestClient, **reading: object) -> tuple[int, dict[str, str]]:
    """An outside run, as ``grpodeck.client.init`` registers it: (id, its token header)."""
    reply = client.post("/api/runs", json={"source": "external", "name": "live", **reading})
    assert reply.status_code == 201, reply.text
    out = reply.json()
    return out["id"], {"Authorization": f"Bearer {out['token']}"}


def send(client: TestClient, run_id: int, headers: dict[str, str],
         rows: list[tuple[int, dict[str, float]]], per_batch: int = 7) -> None:
    for i in range(0, len(rows), per_batch):
        body = {"rows": [{"step": s, "metrics": m} for s, m in rows[i:i + per_batch]]}
        reply = client.post(f"/api/runs/{run_id}/metrics", json=body, headers=headers)
        assert reply.status_code == 200, reply.text


def findings(client: TestClient, run_id: int | str) -> dict:  # type: ignore[type-arg]
    reply = client.get(f"/api/runs/{run_id}/findings")
    assert reply.status_code == 200, reply.text
    return reply.json()  # type: ignore[no-any-return]


def series(client: TestClient, run_id: int | str) -> dict:  # type: ignore[type-arg]
    return client.get(f"/api/runs/{run_id}/metrics").json()  # type: ignore[no-any-return]


def test_a_live_verl_run_is_read_as_its_import_and_diagnose_read_it(
        client: TestClient, tmp_path: Path) -> None:
    run_id, headers = register(client)  # no vocabulary named: detected from the keys
    send(client, run_id, headers, verl_rows())
    live = findings(client, run_id)
    assert {"reward", "entropy", "kl"} <= set(live["metrics"]), live
    assert live["verdict"] != "unknown" and live["reason"] is None
    assert live["vocabulary"] == "verl"
    assert live["read_as"]["critic/score/mean"] == "reward"
    assert live["read_as"]["actor/entropy"] == "entropy"
    assert live["read_as"]["actor/kl_loss"] == "kl"
    stored = series(client, run_id)
    assert stored["reward"]["steps"] == list(range(1, 121))
    assert "critic/score/mean" not in stored  # stored and charted under the canonical name
    assert "critic/rewards/mean" in stored  # the table's second choice for reward keeps its name

    imported = client.post("/api/imports", files={"log": ("verl.log", VERL_LOG)})
    assert imported.status_code == 201, imported.text
    [run] = imported.json()["runs"]
    by_import = findings(client, run["id"])
    assert (by_import["vocabulary"], by_import["read_as"]) == ("verl", live["read_as"])
    assert by_import["metrics"] == live["metrics"]
    assert set(series(client, run["id"])) == set(stored)

    (tmp_path / "verl.log").write_text(VERL_LOG)
    diagnosed = diagnose_path(tmp_path / "verl.log")
    assert diagnosed.metrics == live["metrics"] and diagnosed.verdict != "unknown"
    assert (diagnosed.verdict, {(f.category, f.severity) for f in diagnosed.findings}) == (
        live["verdict"], {(f["category"], f["severity"]) for f in live["findings"]})


def test_a_run_reads_every_later_batch_by_the_vocabulary_it_was_detected_with(
        client: TestClient) -> None:
    """verl's validation keys say nothing about verl on their own: a batch holding only them
    is read by the vocabulary the run's first batch showed."""
    run_id, headers = register(client)
    send(client, run_id, headers, verl_rows()[:3])
    send(client, run_id, headers, [(4, {"val/test_score/openai/gsm8k": 0.25})])
    stored = series(client, run_id)
    assert (stored["eval_reward"]["steps"], stored["eval_reward"]["values"]) == ([4], [0.25])
    assert "val/test_score/openai/gsm8k" not in stored
    assert findings(client, run_id)["read_as"]["val/test_score/openai/gsm8k"] == "eval_reward"


def test_metric_map_given_at_registration_reads_every_batch_of_a_live_run(
        client: TestClient) -> None:
    run_id, headers = register(client, metric_map={"mean_reward": "reward", "KL": "kl"})
    rows = [(s, {"mean_reward": 0.8 if s < 30 else 0.0, "KL": 0.01 * s, "loss": 0.1})
            for s in range(1, 61)]
    send(client, run_id, headers, rows, per_batch=5)
    stored = series(client, run_id)
    assert stored["reward"]["steps"] == list(range(1, 61))
    assert stored["kl"]["values"][-1] == pytest.approx(0.6)
    assert not {"mean_reward", "KL"} & set(stored)
    report = findings(client, run_id)
    assert report["read_as"] == {"KL": "kl", "mean_reward": "reward"}
    assert {"reward", "kl"} <= set(report["metrics"]) and report["verdict"] != "unknown"
    # mean_reward and KL are spellings of the loop vocabulary (issue 32): detected, and the
    # user's map, naming the same, still decides
    assert report["vocabulary"] == "loop"


def test_a_live_run_reads_the_names_its_keys_infer_as_an_import_does(
        client: TestClient, tmp_path: Path) -> None:
    """Issue 54: a hand-written loop reporting ``rollout_reward_mean``, ``gradient_norm`` and,
    on some steps only, ``val_accuracy``, is read live as its log is imported."""
    run_id, headers = register(client)
    rows = [(s, {"rollout_reward_mean": 0.5, "rollout_reward_max": 1.0, "gradient_norm": 0.4,
                 **({"val_accuracy": 0.3} if s % 10 == 0 else {})}) for s in range(1, 41)]
    send(client, run_id, headers, rows, per_batch=5)
    report = findings(client, run_id)
    expected = {"rollout_reward_mean": "reward", "gradient_norm": "grad_norm",
                "val_accuracy": "eval_reward", "rollout_reward_max": "reward_max"}
    assert report["read_as"] == expected and report["verdict"] != "unknown"
    stored = series(client, run_id)
    assert stored["eval_reward"]["steps"] == [10, 20, 30, 40]
    assert stored["reward"]["values"][0] == 0.5  # a max is never the reward
    path = tmp_path / "loop.jsonl"
    path.write_text("".join(json.dumps({"step": s, **m}) + "\n" for s, m in rows))
    assert diagnose_path(path).metrics == report["metrics"]


def test_the_mlflow_api_reads_verls_names_too(client: TestClient) -> None:
    made = client.post(f"{API}/runs/create", json={"experiment_id": "0", "run_name": "verl"})
    assert made.status_code == 200, made.text
    run_id = made.json()["run"]["info"]["run_id"]
    metrics = [{"key": k, "value": v, "step": s, "timestamp": 0}
               for s, row in verl_rows()[:20] for k, v in row.items()]
    for i in range(0, len(metrics), 100):  # several batches, as MLflow's client splits them
        reply = client.post(f"{API}/runs/log-batch",
                            json={"run_id": run_id, "metrics": metrics[i:i + 100]})
        assert reply.status_code == 200, reply.text
    report = findings(client, run_id)
    assert {"reward", "entropy", "kl"} <= set(report["metrics"])
    assert report["read_as"]["critic/score/mean"] == "reward"
    assert series(client, run_id)["reward"]["steps"] == list(range(1, 21))


def test_the_run_page_lists_what_was_read_as_what_escaped(client: TestClient) -> None:
    key = "<i>acc</i> & co"
    run_id, headers = register(client, metric_map={key: "reward"})
    send(client, run_id, headers, [(1, {key: 0.5, "loss": 1.0})])
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    read_as = one(page.text, "#read-as")
    assert read_as.select_one("summary").get_text(" ", strip=True) == \
        "1 key read as the Deck's names"
    assert [li.get_text(" ", strip=True) for li in read_as.select("li")] == [
        f"{key} read as reward"]
    assert not read_as.select("i")  # the key is text, not markup
    fragment = client.get(f"/runs/{run_id}/_findings")
    assert "read as" in one(fragment.text, "#read-as").get_text()


def test_a_run_with_nothing_renamed_shows_no_read_as(client: TestClient) -> None:
    run_id, headers = register(client)
    send(client, run_id, headers, [(1, {"reward": 0.5, "kl": 0.1})])
    assert not html(client.get(f"/runs/{run_id}").text).select("#read-as")
    assert findings(client, run_id)["read_as"] == {}


@pytest.mark.parametrize(("extra", "says"), [
    ({"metric_map": {"a": "reward", "b": "reward"}}, "both map to 'reward'"),
    ({"metric_map": {" ": "reward"}}, "cannot be blank"),
    ({"metric_map": {"a": ""}}, "cannot be blank"),
    ({"metric_map": {"a": 1}}, "'metric_map', 'a'"),
    ({"metric_map": {f"k{i}": f"n{i}" for i in range(201)}}, "metric_map"),
    ({"vocabulary": "deepspeed"}, "'trl', 'verl', 'openrlhf' or 'loop'"),
])
def test_a_bad_reading_is_refused_with_its_reason(client: TestClient, extra: dict,  # type: ignore[type-arg]
                                                  says: str) -> None:
    reply = client.post("/api/runs", json={"source": "external", "name": "bad", **extra})
    assert reply.status_code == 422, reply.text
    assert says in str(reply.json()), reply.text
    assert client.get("/api/runs").json() == []


@pytest.mark.one_backend
def test_the_contract_names_every_vocabulary_the_server_knows() -> None:
    assert set(get_args(Vocabulary)) == set(vocabulary_names())


def test_a_table_rename_never_overwrites_a_name_the_run_sends_itself() -> None:
    rows = [(1, {"critic/score/mean": 0.2, "reward": 0.9, "actor/entropy": 0.5})]
    out, reading = read_rows(rows, Reading.start())
    assert out == [(1, {"critic/score/mean": 0.2, "reward": 0.9, "entropy": 0.5})]
    # a later batch without the run's own reward is read the same way, not renamed now
    later, _ = read_rows([(2, {"critic/score/mean": 0.3})], reading, frozenset(out[0][1]))
    assert later == [(2, {"critic/score/mean": 0.3})]


def test_the_users_mapping_wins_over_the_vocabulary_and_old_spellings_match() -> None:
    rows = [(1, {"critic/score/mean": 0.2, "acc": 0.7, "completions/mean_length": 9.0})]
    out, reading = read_rows(rows, Reading.start(mapping={"acc": "reward",
                                                          "completion_length": "length"}))
    assert out == [(1, {"critic/score/mean": 0.2, "reward": 0.7, "length": 9.0})]
    assert reading.renames == {"acc": "reward", "completions/mean_length": "length"}
