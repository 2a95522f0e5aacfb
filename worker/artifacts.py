"""After the training child exits: upload what it saved to the server (the run's Artifacts tab).

The child saves into its output folder (``checkpoint-N`` folders at ``save_steps``, the final
model and ``trainer_state.json`` when checkpoints were asked for); this machine may not share a
disk with the web app, so the files travel through the report API with the run token, before
the run's end is reported (the token is revoked then). Uploading after the child exits, rather
than from a ``TrainerCallback.on_save`` in the child, keeps training from waiting on the
network and uploads a failed run's checkpoints too; the cost is that they appear at the end.
A failed upload is logged and never keeps the run's end from being reported.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from grpodeck.contract.artifacts import checkpoint_step
from worker.run_client import RunClient
from worker.training.child import FINAL_MODEL_DIR

log = logging.getLogger(__name__)


def saved(out: Path) -> list[tuple[Path, str, int | None]]:
    """(path, kind, step) of what the child saved, checkpoints oldest first (the server's
    retention keeps the newest)."""
    checkpoints = sorted((step, p) for p in out.glob("checkpoint-*")
                         if p.is_dir() and (step := checkpoint_step(p.name)) is not None)
    found: list[tuple[Path, str, int | None]] = [(p, "checkpoint", s) for s, p in checkpoints]
    state = out / "trainer_state.json"
    last = _global_step(state)
    if (out / FINAL_MODEL_DIR).is_dir():
        found.append((out / FINAL_MODEL_DIR, "model", last))
    if state.is_file():
        found.append((state, "trainer_state", last))
    return found


def _global_step(state: Path) -> int | None:
    try:
        step = json.loads(state.read_text()).get("global_step")
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) and step >= 0 else None


def upload_saved(client: RunClient, out: Path) -> int:
    """Upload each saved artifact; returns how many the server stored."""
    stored = 0
    for path, kind, step in saved(out):
        try:
            client.upload_artifact(path, kind, step)
            stored += 1
        except Exception as exc:  # noqa: BLE001 - the run's end must still be reported
            log.warning("run %s: %s was not uploaded: %s", client.run_id, path.name, exc)
    return stored
