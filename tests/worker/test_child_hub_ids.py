"""Bug 4 (issue 7): a hub-shaped id (``org/name``) must never load a folder that happens to sit
next to the worker. ``load_dataset`` and ``from_pretrained`` both try a local path first, so the
training child works from an empty directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_hub_id_that_names_a_local_folder_reads_nothing_from_it(receiver, tmp_path: Path) -> None:
    work = tmp_path / "worker-cwd"
    (work / "private" / "notes").mkdir(parents=True)
    (work / "private" / "notes" / "data.jsonl").write_text(
        "".join(json.dumps({"prompt": f"TOP SECRET line {i}"}) + "\n" for i in range(8)))
    spec = {"model": "builtin:tiny-random", "dataset": "private/notes", "max_steps": 1,
            "max_completion_length": 8, "rewards": [{"name": "length_target"}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "worker.training.child", "--spec", str(tmp_path / "spec.json"),
         "--run-id", "5", "--report-url", receiver.url,
         "--output-dir", str(tmp_path / "out")],
        cwd=work, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
             "PYTHONPATH": str(ROOT), "GRPODECK_RUN_TOKEN": "t"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "could not load dataset 'private/notes' from the Hugging Face Hub" in proc.stderr
    assert "TOP SECRET" not in json.dumps(receiver.requests) + proc.stderr + proc.stdout
