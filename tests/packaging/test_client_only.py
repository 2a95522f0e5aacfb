"""grpodeck-client, installed alone into a fresh venv: no server package comes with it, and it
reports a run and uploads a log to a live Deck that requires an API key. ``grpodeck import
--url`` (the server's CLI) uploads over HTTP the same way, without touching a database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from app.core.config import ROOT
from tests.app.test_imports import trl_output_dir
from tests.conftest import write_trainer_state
from tests.packaging.conftest import SERVER_STACK, KeyedDeck, clean_env, installed
from tests.stack import Stack

REPORT = """
import sys
from transformers import TrainerControl, TrainerState, TrainingArguments
from grpodeck.client import DeckCallback

url, key, out = sys.argv[1:4]
args = TrainingArguments(output_dir=out, max_steps=3, logging_steps=1, report_to=[])
state, control = TrainerState(max_steps=3), TrainerControl()
deck = DeckCallback(url=url, name="from-a-training-node", api_key=key, flush_seconds=0.2)
deck.on_train_begin(args, state, control)
for step in (1, 2, 3):
    state.global_step = step
    deck.on_log(args, state, control, logs={"loss": 0.5 / step, "reward": step / 10,
                                            "reward_std": 0.2, "kl": 0.01 * step})
deck.on_train_end(args, state, control)
print("RUN", deck.run.id)
"""


def in_venv(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=300, check=False, env=clean_env(HF_HUB_OFFLINE="1"))


def runs_named(stack: Stack, auth: dict[str, str], name: str) -> list[dict]:  # type: ignore[type-arg]
    return [r for r in httpx.get(f"{stack.url}/api/runs", headers=auth, timeout=10).json()
            if r["name"] == name]


def test_the_client_installs_no_server_package(client_venv: Path, tmp_path: Path) -> None:
    packages = installed(client_venv)
    assert "grpodeck-client" in packages and "transformers" in packages  # the [trl] extra
    assert not packages & set(SERVER_STACK), sorted(packages & set(SERVER_STACK))
    assert "grpodeck" not in packages and "torch" not in packages
    found = in_venv(client_venv, "python", "-c", "import importlib.util as u; print([m for m in "
                    f"{list(SERVER_STACK) + ['app', 'worker']!r} if u.find_spec(m)])", cwd=tmp_path)
    assert found.stdout.strip() == "[]", found.stderr


def test_the_client_reports_a_run_to_a_live_deck(client_venv: Path, keyed_deck: KeyedDeck,
                                                 tmp_path: Path) -> None:
    script = tmp_path / "report.py"
    script.write_text(REPORT)
    done = in_venv(client_venv, "python", str(script), keyed_deck.stack.url, keyed_deck.key,
                   str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = int(done.stdout.split("RUN")[1].split()[0])
    stack, auth = keyed_deck.stack, keyed_deck.auth
    run = httpx.get(f"{stack.url}/api/runs/{run_id}", headers=auth, timeout=10).json()
    assert run["name"] == "from-a-training-node" and run["status"] == "succeeded", run
    series = httpx.get(f"{stack.url}/api/runs/{run_id}/metrics", headers=auth, timeout=10).json()
    assert series["reward"]["steps"] == [1, 2, 3]


def test_grpodeck_client_import_uploads_a_run_folder(client_venv: Path, keyed_deck: KeyedDeck,
                                                      tmp_path: Path) -> None:
    folder = trl_output_dir(tmp_path / "node-run")
    done = in_venv(client_venv, "grpodeck-client", "import", "--url", keyed_deck.stack.url,
                   "--api-key", keyed_deck.key, str(folder), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [run] = runs_named(keyed_deck.stack, keyed_deck.auth, "node-run")
    assert f"imported run {run['id']}" in done.stdout
    rollouts = httpx.get(f"{keyed_deck.stack.url}/api/runs/{run['id']}/rollouts",
                         headers=keyed_deck.auth, timeout=10).json()
    assert rollouts["steps"] == list(range(1, 41, 2))


def test_grpodeck_import_url_uploads_over_http_with_the_api_key(keyed_deck: KeyedDeck,
                                                                tmp_path: Path) -> None:
    """From the checkout's CLI, with no database reachable: the upload is all it does."""
    log = write_trainer_state(tmp_path / "trainer_state.json", range(1, 4), reward=0.5, loss=0.1)
    env = {**os.environ, "GRPODECK_API_KEY": keyed_deck.key,
           "GRPODECK_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none"}
    cmd = [sys.executable, "-m", "app.cli", "import", str(log), "--url", keyed_deck.stack.url]
    done = subprocess.run([*cmd, "--name", "over-http"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    [run] = runs_named(keyed_deck.stack, keyed_deck.auth, "over-http")
    assert run["source"] == "imported" and f"imported run {run['id']}" in done.stdout
    refused = subprocess.run([*cmd, "--name", "no-key"], cwd=ROOT,
                             env={**env, "GRPODECK_API_KEY": ""}, capture_output=True, text=True,
                             timeout=120, check=False)
    assert refused.returncode == 1 and "rejected (401)" in refused.stderr, refused.stderr
    assert runs_named(keyed_deck.stack, keyed_deck.auth, "no-key") == []
    assert json.loads(log.read_text())["global_step"] == 3  # the file is only read

