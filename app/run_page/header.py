"""The facts a run page's header shows: only what is known about the run, in words.

Why: runs reported by an outside script or imported from a log carry whatever their spec
holds; a header built from fixed keys printed "None · None · G=8 · lr=None". Each fact here is
shown only when its value is there, so an unknown field leaves nothing behind.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.artifacts.service import has_artifacts
from app.logs import service as log_service
from app.rollouts.models import RolloutGroup
from app.runs import lifecycle
from app.runs.models import Run


def _known(value: Any) -> bool:
    return value is not None and value != "" and value != []


def _rewards(spec: dict[str, Any]) -> str | None:
    rewards = spec.get("rewards")
    if not isinstance(rewards, list) or not rewards:
        return None
    parts = [f"{r['name']}×{r.get('weight', 1)}" for r in rewards
             if isinstance(r, dict) and _known(r.get("name"))]
    return "rewards: " + ", ".join(parts) if parts else None


def header_facts(run: Run) -> list[str]:
    """['SmolLM2-135M', 'builtin:gsm8k', 'rewards: a×1.0', 'G=8', 'β=0.04', 'lr=1e-06'],
    leaving out every fact the run does not know."""
    spec = run.spec or {}
    facts: list[str] = []
    if run.source == "imported" and _known(spec.get("source_file")):
        fmt = spec.get("source_format")
        facts.append(f"imported from {spec['source_file']}" + (f" ({fmt})" if _known(fmt) else ""))
    elif run.source == "external":
        facts.append("reported by an outside script")
    for key in ("model", "dataset"):
        if _known(spec.get(key)):
            facts.append(str(spec[key]))
    if rewards := _rewards(spec):
        facts.append(rewards)
    for key, label in (("num_generations", "G"), ("beta", "β"), ("learning_rate", "lr")):
        if _known(spec.get(key)):
            facts.append(f"{label}={spec[key]}")
    if devices := _devices(spec):
        facts.append(devices)
    return facts


def _devices(spec: dict[str, Any]) -> str | None:
    """'2 processes (ddp, mixed precision auto)' for a run on many devices (issue 26); the
    worker's devices and the exact accelerate config are at the top of the run's log."""
    n = spec.get("num_processes")
    if not isinstance(n, int) or n < 2:
        return None
    return (f"{n} processes ({spec.get('distributed', 'ddp')}, mixed precision "
            f"{spec.get('mixed_precision', 'auto')})")


def shows_logs(db: Session, run: Run) -> bool:
    """The Logs tab: a launched run has a training child whose output is kept; other runs only
    when some output was stored."""
    return run.source == "launched" or log_service.has_logs(db, run.id)


def shows_rollouts(db: Session, run: Run) -> bool:
    """The Rollouts tab leads somewhere: the run has captured groups, or it is a live launched
    run that captures them (its first ones may not have arrived yet)."""
    if db.scalar(select(RolloutGroup.id).where(RolloutGroup.run_id == run.id).limit(1)):
        return True
    capturing = (run.spec or {}).get("rollout_groups", 0)
    return run.source == "launched" and lifecycle.is_live(run) and bool(capturing)


def shows_artifacts(db: Session, run: Run) -> bool:
    """The Artifacts tab: the run stored some, or it is a launched run that saves checkpoints
    (``save_steps``), whose first ones may not have arrived yet."""
    saves = run.source == "launched" and bool((run.spec or {}).get("save_steps"))
    return saves or has_artifacts(db, run.id)
