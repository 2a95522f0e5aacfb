"""An uploaded dataset without a column its rewards read (``tests`` for unit_tests, the chosen
column for answer_match) is refused at launch, naming the column, by the API, the form and
sweeps; with the column, the launch goes through."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import one
from tests.app.test_clone import submitted
from tests.app.test_local_data import _upload, dirs  # noqa: F401  (the fixture)
from tests.conftest import tiny_spec

ROWS = "\n".join(json.dumps({"prompt": f"p{i}", "answer": str(i)}) for i in range(3))
UNIT = [{"name": "unit_tests", "weight": 1.0, "params": {}}]


def test_api_names_the_missing_column(client: TestClient, dirs) -> None:  # noqa: F811
    assert _upload(client, "qa.jsonl", ROWS).status_code == 201
    reply = client.post("/api/runs", json=tiny_spec(dataset="qa.jsonl", rewards=UNIT))
    assert reply.status_code == 422
    assert [(e["loc"], e["msg"]) for e in reply.json()["detail"]] == [(
        ["body", "dataset"], ("dataset 'qa.jsonl' has no 'tests' column, which reward "
                              "unit_tests needs (its columns: prompt, answer)"))]
    other = [{"name": "answer_match", "params": {"column": "solution"}}]
    reply = client.post("/api/runs", json=tiny_spec(dataset="qa.jsonl", rewards=other))
    assert reply.status_code == 422 and "no 'solution' column" in reply.text
    monitor = [{"name": "length_target"}, {"name": "unit_tests", "weight": 0.0}]
    reply = client.post("/api/runs", json=tiny_spec(dataset="qa.jsonl", rewards=monitor))
    assert reply.status_code == 422 and "no 'tests' column" in reply.text
    sweep = client.post("/api/sweeps", json={"spec": tiny_spec(dataset="qa.jsonl", rewards=UNIT),
                                             "num_generations": [2, 4]})
    assert sweep.status_code == 422 and "no 'tests' column" in sweep.text


@pytest.mark.parametrize("rewards", [
    [{"name": "answer_match", "params": {"column": "answer"}}],
    [{"name": "exact_answer"}],
    [{"name": "length_target"}],
])
def test_columns_present_launch(client: TestClient, dirs, rewards) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    assert _upload(client, "qa.jsonl", ROWS).status_code == 201
    reply = client.post("/api/runs", json=tiny_spec(dataset="qa.jsonl", rewards=rewards))
    assert reply.status_code == 201, reply.text


def test_form_shows_the_missing_column_at_the_dataset(client: TestClient, dirs) -> None:  # noqa: F811
    assert _upload(client, "qa.jsonl", ROWS).status_code == 201
    data = submitted(one(client.get("/runs/new?dataset=qa.jsonl").text, "#run-form"))
    data.update(reward_0_name="unit_tests", reward_0_params="")
    page = client.post("/runs/new", data=data)
    assert page.status_code == 422
    assert "no 'tests' column, which reward unit_tests needs" in one(page.text, "#e-dataset").text
