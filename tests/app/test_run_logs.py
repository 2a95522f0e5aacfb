"""A run's training output through the report API, stored on SQLite and PostgreSQL: a resent
chunk is stored once, the tail keeps the end, the run's delete takes its log, only the run's
own token may write it, and an ended run takes no more."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.logs import service
from tests.app.conftest import one


def post(client: TestClient, run_id: int, headers: dict[str, str], chunks: list[dict],
         stage: str | None = None) -> int:
    reply = client.post(f"/api/runs/{run_id}/logs", json={"chunks": chunks, "stage": stage},
                        headers=headers)
    return reply.status_code


def test_logs_stored_once_in_order_and_deleted_with_the_run(
        client: TestClient, running: tuple[int, dict[str, str]]) -> None:
    run_id, headers = running
    assert post(client, run_id, {"Authorization": "Bearer nope"},
                [{"stream": "stdout", "offset": 0, "text": "x\n"}]) == 401
    assert post(client, run_id, headers, [{"stream": "stdout", "offset": 0, "text": "one\n"}],
                stage="first_step") == 200
    assert post(client, run_id, headers, [{"stream": "stdout", "offset": 0, "text": "one\n"},
                                          {"stream": "stderr", "offset": 0, "text": "two\n"}]) == 200
    assert post(client, run_id, headers, [{"stream": "stdout", "offset": 4, "text": "three\n"}],
                stage="bogus") == 422
    assert client.get(f"/runs/{run_id}/logs.txt").text == "one\ntwo\n"
    assert "waiting for the first step" in one(client.get(f"/runs/{run_id}").text,
                                               "#run-stage").get_text()
    with get_sessionmaker()() as db:
        assert service.tail(db, run_id, max_chars=5) == ("\ntwo\n", True)
    client.post(f"/api/runs/{run_id}/cancel")
    client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert post(client, run_id, headers, [{"stream": "stdout", "offset": 9, "text": "late\n"}]) != 200
    assert client.delete(f"/api/runs/{run_id}").status_code in (200, 204)
    with get_sessionmaker()() as db:
        assert service.tail(db, run_id) == ("", False)
