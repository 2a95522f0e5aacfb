"""Accounts on a real stack (uvicorn + Celery worker, processes configured by environment):
the first admin made from the CLI, `grpodeck launch` with an API key, the worker still
reporting with its per-run token, and `grpodeck serve` refusing the network without accounts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core.config import ROOT
from tests.locked_stack import ADMIN, PASSWORD, cli, locked_stack
from tests.stack import Stack, free_port, wait_healthy

SPEC = {"name": "keyed", "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
        "rewards": [{"name": "length_target", "weight": 1.0, "params": {"target": 20}}],
        "num_generations": 4, "max_steps": 2, "max_completion_length": 16, "logging_steps": 1}


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with locked_stack(tmp_path_factory.mktemp("locked")) as stack:
        yield stack


def test_cli_launch_sends_the_api_key_and_the_worker_reports_with_its_run_token(
        locked: Stack, tmp_path: Path) -> None:
    assert httpx.get(f"{locked.url}/api/runs", timeout=10).status_code == 401
    key = cli("user", "api-key", ADMIN, "--name", "ci", env=locked.env).stdout.strip()
    assert key.startswith("gd_")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    env = {k: v for k, v in locked.env.items() if k != "GRPODECK_API_KEY"}
    refused = cli("launch", str(spec), "--url", locked.url, env=env)
    assert refused.returncode == 1 and "GRPODECK_API_KEY" in refused.stderr
    launched = cli("launch", str(spec), "--url", locked.url, env={**env, "GRPODECK_API_KEY": key})
    assert launched.returncode == 0, launched.stderr
    run_id = int(launched.stdout.split()[1])
    auth = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + 300
    while (run := httpx.get(f"{locked.url}/api/runs/{run_id}", headers=auth, timeout=10).json()
           )["status"] not in {"succeeded", "failed", "cancelled"}:
        assert time.monotonic() < deadline, locked.log("worker")
        time.sleep(0.5)
    assert run["status"] == "succeeded", (run, locked.log("worker"))
    series = httpx.get(f"{locked.url}/api/runs/{run_id}/metrics", headers=auth, timeout=10).json()
    assert series["reward"]["steps"] == [1, 2]


def test_a_browser_session_from_the_login_form(locked: Stack) -> None:
    with httpx.Client(base_url=locked.url, timeout=10) as browser:
        assert browser.get("/runs").headers["location"] == "/login?next=%2Fruns"
        page = browser.post("/login", data={"email": ADMIN, "password": PASSWORD, "next": "/runs"})
        assert page.status_code == 303 and "grpodeck_session" in browser.cookies
        assert ADMIN in browser.get("/runs").text


def _serve(env: dict[str, str], port: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--host", "0.0.0.0",
                             "--port", str(port)], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_serving_on_a_network_address_needs_an_account_first(tmp_path: Path) -> None:
    env = {**os.environ, "GRPODECK_DATABASE_URL": f"sqlite:///{tmp_path / 'grpodeck.db'}",
           "GRPODECK_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.db'}"}
    port = free_port()
    refused = _serve(env, port)
    out, _ = refused.communicate(timeout=120)
    assert refused.returncode == 2, out
    assert "refusing to serve on 0.0.0.0" in out and "grpodeck user create --admin" in out
    assert cli("user", "create", "--admin", ADMIN, env={**env, "GRPODECK_NEW_PASSWORD": "short"}
               ).returncode == 2  # too short: refused, nothing made
    made = cli("user", "create", "--admin", ADMIN, env={**env, "GRPODECK_NEW_PASSWORD": PASSWORD})
    assert made.returncode == 0 and "created admin user" in made.stdout
    assert cli("user", "create", ADMIN, env={**env, "GRPODECK_NEW_PASSWORD": PASSWORD}
               ).returncode == 2  # already exists
    off = _serve({**env, "GRPODECK_AUTH": "off"}, port)
    out, _ = off.communicate(timeout=120)
    assert off.returncode == 2 and "GRPODECK_AUTH=off" in out
    served = _serve(env, port)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", served, lambda: "", timeout=60)
        assert httpx.get(f"http://127.0.0.1:{port}/api/runs").status_code == 401
    finally:
        os.killpg(served.pid, signal.SIGTERM)
        served.wait(timeout=20)
