"""Regressions the form and importer fuzzers found: an uploaded log is imported or refused with
a reason (422), never a 500, whatever its names, keys, steps and values."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


def upload(client: TestClient, content: bytes, filename: str = "log.jsonl", name: str = "",
           completions: list[tuple[str, bytes]] | None = None):  # type: ignore[no-untyped-def]
    files = [("log", (filename, content))] + [("completions", c) for c in completions or []]
    return client.post("/runs/import", data={"name": name}, files=files, follow_redirects=False)


def test_metric_names_with_nul_or_lone_surrogates_are_imported_cleaned(client: TestClient) -> None:
    reply = upload(client, b'{"step": 1, "reward": 1, "a\\u0000b": 2}\n'
                           b'{"step": 2, "reward": 2, "c\\ud800": 3}\n')
    assert reply.status_code == 303
    run_id = reply.headers["location"].rsplit("/", 1)[-1]
    names = set(client.get(f"/api/runs/{run_id}/metrics").json())
    assert names == {"reward", "a\ufffdb", "c?"}


@pytest.mark.parametrize("content,reason", [
    (b'[{"step": 9223372036854775808, "reward": 1}]', "out of range"),
    (b'[{"step": -3, "reward": 1}]', "out of range"),
    (b'{"log_history": [{"step": Infinity, "loss": 1}]}', "has no"),
])
def test_steps_outside_the_storable_range_are_refused(client: TestClient, content: bytes,
                                                      reason: str) -> None:
    reply = upload(client, content, "trainer_state.json")
    assert reply.status_code == 422 and reason in reply.text
    assert client.get("/api/runs").json() == []


def test_non_finite_meta_long_names_and_odd_file_names_are_stored_safely(client: TestClient) -> None:
    content = b'{"log_history": [{"step": 1, "loss": NaN}], "max_steps": NaN, "logging_steps": 1}'
    reply = upload(client, content, filename="x" * 400 + ".json", name="n\x00" + "m" * 500,
                   completions=[("..", b"not parquet"), ("c" * 400, b"not parquet")])
    assert reply.status_code in (303, 422), reply.text
    if reply.status_code == 303:  # completions that are not parquet are refused with a reason
        run = client.get(f"/api/runs/{reply.headers['location'].rsplit('/', 1)[-1]}").json()
        assert len(run["name"]) <= 120 and "max_steps" not in run["spec"]
    assert client.get("/api/runs").status_code == 200


def test_console_logs_with_infinite_epochs_or_runtime_are_imported(client: TestClient) -> None:
    log = (b"{'loss': 1.0, 'epoch': 1}\n{'loss': 2.0, 'epoch': inf}\n"
           b"{'train_runtime': 1e308, 'train_steps_per_second': 1e308, 'epoch': 'x'}\n")
    reply = upload(client, log, "console.log")
    assert reply.status_code == 303, reply.text
