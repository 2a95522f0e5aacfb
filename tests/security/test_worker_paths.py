"""Issue 22 point 6: a run or dry run that fails on the worker tells the web app (and every
user of it) what went wrong, but not where the worker keeps its code, runs, datasets or Python.

A real worker fails a real run and a real dry run on a dataset it does not have (the name is
fine, the file is missing on that worker); the stored error and traceback tail are read back."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core.config import ROOT
from tests.conftest import tiny_spec
from tests.integration.conftest import live_stack
from tests.stack import Stack


@pytest.fixture(scope="module")
def deck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with live_stack("embedded", tmp_path_factory.mktemp("paths-deck")) as live:
        yield live


def _secret_dirs(deck: Stack) -> list[str]:
    return [str(ROOT), str(deck.workdir), sys.prefix, str(Path.home())]


def test_a_failed_run_reports_no_absolute_path_of_the_worker(deck: Stack) -> None:
    run_id = deck.launch(**tiny_spec(name="missing-data", dataset="not-on-this-worker.jsonl"))
    run = deck.wait_for(run_id, {"failed"})
    said = f"{run['error']}\n{run['traceback_tail']}"
    assert "not-on-this-worker.jsonl" in run["error"] and "Traceback" in said  # still useful
    assert 'datasets.py", line' in said  # file names and lines stay
    leaked = [d for d in _secret_dirs(deck) if d in said]
    assert leaked == [], said


def test_a_failed_dry_run_reports_no_absolute_path_of_the_worker(deck: Stack) -> None:
    reply = httpx.post(f"{deck.url}/api/dry-runs", params={"prompts": 2},
                       json=tiny_spec(name="dry", dataset="not-on-this-worker.jsonl"))
    assert reply.status_code == 202, reply.text
    url = f"{deck.url}/api/dry-runs/{reply.json()['id']}"
    deck.wait_until(lambda: httpx.get(url).json()["status"] != "queued", "the dry run's answer",
                    timeout=240)
    body = httpx.get(url).json()
    assert "not-on-this-worker.jsonl" in body["error"], body
    leaked = [d for d in _secret_dirs(deck) if d in body["error"]]
    assert leaked == [], body["error"]
