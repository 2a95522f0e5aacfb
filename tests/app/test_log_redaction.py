"""Secrets a training script prints never reach a reader: the shipped log (Logs tab and
``logs.txt``), the run's error and traceback (the run page) are redacted before they are stored,
terminal sequences stripped; the run's own token (random, no pattern knows it) too. And the
shipped-log cap holds for a whole batch, not just chunk by chunk (issue 33)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.logs import service
from tests.security.test_redaction import SECRETS

ESCAPES = "\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\ \x1b]0;title\x07\x1b[2J"


def _post(client: TestClient, run_id: int, headers: dict[str, str], texts: list[str],
          offset: int = 0) -> int:
    chunks = []
    for text in texts:
        chunks.append({"stream": "stdout", "offset": offset, "text": text})
        offset += len(text.encode())
    reply = client.post(f"/api/runs/{run_id}/logs", json={"chunks": chunks}, headers=headers)
    assert reply.status_code == 200, reply.text
    return int(reply.json()["stored"])


def test_logs_page_download_and_error_show_no_secret(
        client: TestClient, running: tuple[int, dict[str, str]]) -> None:
    run_id, headers = running
    token = headers["Authorization"].removeprefix("Bearer ")
    printed = [text + "\n" for text, _ in SECRETS.values()]
    _post(client, run_id, headers, ["".join(printed), f"my run token is {token}\n", ESCAPES + "\n"])
    trace = "Traceback:\n  " + "\n  ".join(printed) + f"RuntimeError: bad token {token}\x1b[2J"
    reply = client.post(f"/api/runs/{run_id}/finished", headers=headers,
                        json={"returncode": 1, "error": "login failed: " + printed[1],
                              "traceback_tail": trace})
    assert reply.status_code == 200, reply.text
    pages = {"logs.txt": client.get(f"/runs/{run_id}/logs.txt").text,
             "logs": client.get(f"/runs/{run_id}/logs").text,
             "run": client.get(f"/runs/{run_id}").text,
             "api": client.get(f"/api/runs/{run_id}").text}
    for where, text in pages.items():
        for name, (_, secret) in SECRETS.items():
            assert secret not in text, (where, name)
        assert token not in text, where
        assert "\x1b" not in text and "\\u001b" not in text, where
    assert "link \n" in pages["logs.txt"] and "[redacted]" in pages["logs.txt"]
    assert "[redacted]" in pages["run"] and "login failed" in pages["run"]


def test_a_batch_that_would_pass_the_cap_stores_only_what_fits(
        client: TestClient, running: tuple[int, dict[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run_id, headers = running
    monkeypatch.setattr(service, "MAX_STORED_CHARS", 1_000)
    assert _post(client, run_id, headers, ["a" * 400 + "\n"]) == 1
    # 3 x 401 more: one fits (802 <= 1000), the next two would store past the cap.
    assert _post(client, run_id, headers, [
        "b" * 400 + "\n", "c" * 400 + "\n", "d" * 400 + "\n"], offset=401) == 1
    stored = client.get(f"/runs/{run_id}/logs.txt").text
    assert len(stored) <= 1_000 and "b" * 400 in stored and "c" not in stored
