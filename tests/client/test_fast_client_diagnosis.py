"""A 20,000-step run reported through ``grpodeck.client.init/log/finish`` as fast as a loop can
call ``log()`` (issue 31): the run page's findings must be what ``grpodeck diagnose`` says of the
same rows exported from the API. Before the fix the live diagnosis placed the reward's best at
0.41 (step 3,520) and the collapses ~6,000 steps late, against the chart's peak of ~0.8 at 8k."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from app.core.config import ROOT
from grpodeck.client import init
from tests.client.test_callback_live import deck  # noqa: F401  (fixture)
from tests.stack import Stack

STEPS = 20_000


def rows(seed: int = 0) -> list[tuple[int, dict[str, float]]]:
    """Reward rising to ~0.8 at step 8k, then falling; entropy collapsing, KL growing from 7k."""
    rnd = random.Random(seed)
    out = []
    for s in range(1, STEPS + 1):
        r = 0.1 + 0.7 * s / 8000 if s <= 8000 else 0.8 - 0.6 * min(1.0, (s - 8000) / 8000)
        ent = 1.2 if s < 7000 else max(0.02, 1.2 * math.exp(-(s - 7000) / 1500))
        kl = 0.02 if s < 7000 else 0.02 + 0.0005 * (s - 7000)
        out.append((s, {"reward": r + rnd.gauss(0, 0.05), "reward_std": 0.2 + rnd.gauss(0, 0.02),
                        "entropy": ent * (1 + rnd.gauss(0, 0.03)),
                        "kl": kl * (1 + rnd.gauss(0, 0.05))}))
    return out


def exported_rows(deck: Stack, run_id: int) -> list[dict[str, Any]]:  # noqa: F811
    """The run's stored points as JSON rows, the way a user would export them from the API."""
    series = httpx.get(f"{deck.url}/api/runs/{run_id}/metrics", timeout=60).json()
    by_step: dict[int, dict[str, Any]] = {}
    for name, points in series.items():
        for step, value in zip(points["steps"], points["values"], strict=True):
            by_step.setdefault(step, {"step": step})[name] = value
    return [by_step[s] for s in sorted(by_step)]


def test_a_20k_step_fast_client_run_is_diagnosed_like_its_exported_rows(
        deck: Stack, tmp_path: Path) -> None:  # noqa: F811
    run = init(deck.url, "fast-20k", spool_dir=tmp_path)
    for step, metrics in rows():
        run.log(metrics, step=step)
    assert run.finish() == "succeeded"
    exported = exported_rows(deck, run.id)
    assert len(exported) == STEPS  # nothing dropped on the way
    log = tmp_path / "exported.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in exported))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}"}
    cli = subprocess.run([sys.executable, "-m", "app.cli", "diagnose", str(log), "--json"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
                         check=False)
    assert cli.returncode == 0, cli.stderr[-3000:]
    expected = {f["category"]: f for f in json.loads(cli.stdout)["findings"]}
    stored = httpx.get(f"{deck.url}/api/runs/{run.id}/findings", timeout=30).json()["findings"]
    got = {f["category"]: f for f in stored}
    assert {"reward_collapse", "entropy_collapse", "kl_blowup"} <= set(expected)
    assert set(got) == set(expected)
    for category, want in expected.items():
        have = got[category]
        assert (have["severity"], have["first_step"], have["last_step"]) == (
            want["severity"], want["first_step"], want["last_step"]), category
        assert have["summary"] == want["summary"], category
    best = expected["reward_collapse"]["evidence"]
    assert 0.7 < best["best_reward"] < 0.9 and 7000 < best["best_step"] < 9000
