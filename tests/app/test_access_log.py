"""The web server's access log keeps people's requests and every error, and leaves out the
routine reports a training run sends about once a second when they succeed
(``app/core/access_log.py``); ``GRPODECK_ACCESS_LOG_REPORTS=true`` keeps those too. Checked on
a real ``grpodeck serve`` process: its stderr is the log an operator reads."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from app.core.access_log import QuietRoutineReports
from app.core.config import ROOT
from app.core.db import make_engine
from app.runs import service
from grpodeck.contract.heartbeat import HEARTBEAT_PATH
from grpodeck.contract.spec import RunSpec
from tests.conftest import migrate
from tests.stack import free_port, wait_healthy

ACCESS_FORMAT = '%s - "%s %s HTTP/%s" %d'  # uvicorn's


def access_record(method: str, path: str, status: int) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, ACCESS_FORMAT,
                             ("127.0.0.1:5000", method, path, "1.1", status), None)


@pytest.mark.parametrize(("method", "path", "status", "kept"), [
    ("POST", "/api/runs/7/metrics", 200, False),
    ("POST", "/api/runs/7/metrics?x=1", 200, False),
    ("GET", "/api/runs/7/control", 200, False),
    ("POST", "/api/runs/7/logs", 200, False),
    ("POST", HEARTBEAT_PATH, 204, False),
    ("POST", "/api/2.0/mlflow/runs/log-batch", 200, False),
    ("POST", "/api/2.0/mlflow/runs/log-metric", 200, False),
    ("POST", "/api/runs/7/metrics", 401, True),  # refused: an operator must see it
    ("POST", "/api/runs/7/metrics", 503, True),
    ("GET", "/api/runs/7/metrics", 200, True),  # a person's (or a script's) read
    ("POST", "/api/runs/7/claim", 200, True),  # once per run: kept
    ("POST", "/api/runs/7/finished", 200, True),
    ("GET", "/runs/7", 200, True),
    ("POST", "/api/runs/7/metrics/extra", 200, True),
])
def test_the_filter_drops_only_routine_reports_that_succeeded(
        method: str, path: str, status: int, kept: bool) -> None:
    assert QuietRoutineReports().filter(access_record(method, path, status)) is kept


def test_a_record_not_in_uvicorns_access_format_is_kept() -> None:
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, "free text %s",
                               ("POST /api/runs/7/metrics",), None)
    assert QuietRoutineReports().filter(record)


@contextmanager
def served(database_url: str, log: Path, extra_env: dict[str, str]) -> Iterator[str]:
    """``grpodeck serve`` on a migrated database, its output in ``log``."""
    port = free_port()
    env = {**os.environ, "GRPODECK_DATABASE_URL": database_url,
           "GRPODECK_BROKER_URL": f"sqla+sqlite:///{log.parent / 'broker.db'}",
           "GRPODECK_PUBLIC_URL": f"http://127.0.0.1:{port}", **extra_env}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--no-migrate",
                                 "--port", str(port)], env=env, cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log.read_text, timeout=120)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(params=["quiet", "all"])
def server(request: pytest.FixtureRequest, tmp_path: Path
           ) -> Iterator[tuple[str, str, Path, bool]]:
    """(url, database URL, log, whether routine reports are kept)."""
    database_url = f"sqlite:///{tmp_path / 'grpodeck.db'}"
    migrate(database_url)
    keep_all = request.param == "all"
    env = {"GRPODECK_ACCESS_LOG_REPORTS": "true"} if keep_all else {}
    log = tmp_path / "web.log"
    with served(database_url, log, env) as url:
        yield url, database_url, log, keep_all


def claimed_run(url: str, database_url: str) -> tuple[int, str]:
    engine = make_engine(database_url)
    with Session(engine) as db:
        run, ticket = service.create_run(db, spec=RunSpec(name="logged", max_steps=100,
                                                          model="builtin:tiny-random"))
        db.commit()
        run_id = run.id
    engine.dispose()
    reply = httpx.post(f"{url}/api/runs/{run_id}/claim", json={"pid": 1}, timeout=30,
                       headers={"Authorization": f"Bearer {ticket}"})
    assert reply.status_code == 200, reply.text
    return run_id, reply.json()["token"]


def test_a_served_log_leaves_out_successful_reports_and_keeps_the_rest(
        server: tuple[str, str, Path, bool]) -> None:
    url, database_url, log, keep_all = server
    run_id, token = claimed_run(url, database_url)
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=30) as client:
        for step in (1, 2):
            assert client.post(f"/api/runs/{run_id}/metrics", headers=auth, json={
                "rows": [{"step": step, "metrics": {"loss": 0.5}}]}).status_code == 200
        assert client.get(f"/api/runs/{run_id}/control", headers=auth).status_code == 200
        refused = client.post(f"/api/runs/{run_id}/metrics", json={"rows": []},
                              headers={"Authorization": "Bearer not-the-token"})
        assert refused.status_code == 401
        assert client.get(f"/runs/{run_id}").status_code == 200  # a person's page: the last
    deadline = time.monotonic() + 30
    while f'"GET /runs/{run_id} HTTP/1.1" 200' not in (text := log.read_text()):
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    assert f'"POST /api/runs/{run_id}/metrics HTTP/1.1" 401' in text
    assert f'"POST /api/runs/{run_id}/claim HTTP/1.1" 200' in text
    routine = [f'"POST /api/runs/{run_id}/metrics HTTP/1.1" 200',
               f'"GET /api/runs/{run_id}/control HTTP/1.1" 200']
    for line in routine:
        assert (line in text) is keep_all, (line, text)
    assert text.count(routine[0]) == (2 if keep_all else 0)
