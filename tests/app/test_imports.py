"""Importing a whole TRL output folder: the trainer state and the completions parquet files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.imports.service import import_log


def trl_output_dir(root: Path, repetitive_from: int = 999) -> Path:
    """What TRL leaves behind: checkpoint-N/trainer_state.json and completions/*.parquet."""
    ckpt = root / "checkpoint-40"
    ckpt.mkdir(parents=True)
    history = [{"step": s, "loss": 0.0, "reward": 0.5, "reward_std": 0.3,
                "frac_reward_zero_std": 0.2, "rewards/acc/mean": 0.5} for s in range(1, 41)]
    ckpt.joinpath("trainer_state.json").write_text(json.dumps({"global_step": 40,
                                                               "log_history": history}))
    (root / "completions").mkdir()
    for step in range(1, 41, 2):
        text = "same same same same same same" if step >= repetitive_from else f"answer {step}"
        rows = [{"step": step, "prompt": [{"role": "user", "content": f"Q{g}"}],
                 "completion": [{"role": "assistant", "content": f"{text} {i}" if step < repetitive_from else text}],
                 "acc": float(i % 2), "advantage": 0.87 if i % 2 else -0.87}
                for g in range(2) for i in range(4)]
        pd.DataFrame(rows).to_parquet(root / "completions" / f"completions_{step:05d}.parquet")
    return root


def test_import_folder_stores_rollouts(client: TestClient, tmp_path: Path) -> None:
    folder = trl_output_dir(tmp_path / "out")
    with get_sessionmaker()() as db:
        run = import_log(db, folder, "with-rollouts")
        db.commit()
        run_id = run.id
    body = client.get(f"/api/runs/{run_id}/rollouts", params={"step": 1}).json()
    assert body["steps"] == list(range(1, 41, 2))
    group = body["groups"][0]
    assert group["prompt"] == "user: Q0" and len(group["completions"]) == 4
    assert group["completions"][1]["advantage"] == 0.87 and group["outcome"] == "mixed"
    assert client.get(f"/runs/{run_id}/rollouts").status_code == 200


def test_upload_with_completions(client: TestClient, tmp_path: Path) -> None:
    folder = trl_output_dir(tmp_path / "out")
    parquet = sorted((folder / "completions").glob("*.parquet"))[:3]
    files = [("log", ("trainer_state.json", (folder / "checkpoint-40/trainer_state.json").read_bytes())),
             *[("completions", (p.name, p.read_bytes())) for p in parquet]]
    page = client.post("/runs/import", files=files, follow_redirects=False)
    assert page.status_code == 303, page.text
    run_id = int(page.headers["location"].rsplit("/", 1)[1])
    assert client.get(f"/api/runs/{run_id}/rollouts").json()["steps"] == [1, 3, 5]


def test_diagnose_folder_sees_repetitive_completions(tmp_path: Path) -> None:
    folder = trl_output_dir(tmp_path / "out", repetitive_from=11)
    out = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(folder), "--json"],
                         capture_output=True, text=True, check=True).stdout
    findings = json.loads(out)["findings"]
    degenerate = [f for f in findings if f["category"] == "degenerate_completions"]
    assert degenerate and {f["metric"] for f in degenerate} >= {"rollouts/repetition"}


def _latest_run() -> tuple[str, dict]:
    from sqlalchemy import select

    from app.runs.models import Run

    with get_sessionmaker()() as db:
        run = db.scalars(select(Run).order_by(Run.id.desc()).limit(1)).one()
        return run.name, dict(run.spec or {})


def test_grpodeck_import_of_a_checkpoint_names_the_run_and_reads_training_args(
        client: TestClient, tmp_path: Path) -> None:
    """``grpodeck import out/checkpoint-40``: the run is "out" (a checkpoint is not the run's
    name) and its spec has the GRPOConfig torch.save'd as training_args.bin, read safely."""
    import torch
    from trl import GRPOConfig
    from typer.testing import CliRunner

    from app.cli import cli

    folder = trl_output_dir(tmp_path / "out")
    args = GRPOConfig(output_dir=str(folder), max_completion_length=321, num_generations=4,
                      beta=0.04, learning_rate=3e-6, report_to="none", use_cpu=True, bf16=False)
    torch.save(args, folder / "checkpoint-40" / "training_args.bin")
    done = CliRunner().invoke(cli, ["import", str(folder / "checkpoint-40")])
    assert done.exit_code == 0, done.output
    name, spec = _latest_run()
    assert name == "out"
    assert (spec["max_completion_length"], spec["num_generations"], spec["beta"],
            spec["learning_rate"]) == (321, 4, 0.04, 3e-6)
    assert "config_not_read" not in spec


def test_import_of_an_output_folder_reads_a_saved_config_json(client: TestClient,
                                                              tmp_path: Path) -> None:
    """The run folder itself, with the arguments saved as JSON: named after the folder."""
    folder = trl_output_dir(tmp_path / "my-grpo-run")
    (folder / "checkpoint-40" / "training_args.json").write_text(json.dumps(
        {"max_completion_length": 128, "num_generations": 8, "beta": 0.0,
         "learning_rate": 1e-6, "output_dir": str(folder)}))
    with get_sessionmaker()() as db:
        import_log(db, folder)
        db.commit()
    name, spec = _latest_run()
    assert name == "my-grpo-run"
    assert (spec["max_completion_length"], spec["num_generations"], spec["beta"],
            spec["learning_rate"]) == (128, 8, 0.0, 1e-6)
