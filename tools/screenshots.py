"""The README's screenshots (docs/screenshots/*.png): the run page, compare and the runs list.

Starts a real stack (web + worker, SQLite in a temporary folder), reports two GRPO runs into it
the way a training process does (claim, metrics, rollouts, finished), and photographs the pages
with Playwright and Debian's chromium. Not a test: run it after a visible change to the pages.

    PYTHONPATH=$PWD .venv/bin/python tools/screenshots.py
"""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.e2e.conftest import CHROMIUM_ARGS
from tests.stack import Stack

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
STEPS = 200
PROMPTS = [("Natalia sold clips to 48 friends in April, then half as many in May. How many in all?",
            "48 + 24 = 72. The answer is 72.", "She sold 48 clips. The answer is 48."),
           ("A train covers 60 km in 45 minutes. What is its speed in km/h?",
            "60 / 0.75 = 80. The answer is 80.", "60 * 45 = 2700. The answer is 2700.")]


def metrics(step: int, lr_scale: float, rng: random.Random) -> dict[str, float]:
    """One logged step of a GRPO run on a math set: reward climbs, entropy falls, KL grows;
    a learning rate too high (lr_scale > 1) makes KL and the gradient norm spike late."""
    t = step / STEPS
    spike = max(0.0, lr_scale - 1) * math.exp(-((t - 0.7) / 0.05) ** 2)
    reward = 0.15 + 0.6 * (1 - math.exp(-3 * t)) - 0.3 * spike + rng.gauss(0, 0.05)
    return {"reward": reward, "reward_std": 0.35 - 0.1 * t + rng.gauss(0, 0.02),
            "kl": 0.002 + 0.03 * t * lr_scale + 0.2 * spike + abs(rng.gauss(0, 0.002)),
            "entropy": 1.2 - 0.5 * t + rng.gauss(0, 0.02), "loss": rng.gauss(0.01, 0.005),
            "grad_norm": 0.8 + 4 * spike + abs(rng.gauss(0, 0.15)),
            "learning_rate": 1e-6 * lr_scale,
            "completions/mean_length": 180 - 60 * t + rng.gauss(0, 6),
            "completions/clipped_ratio": max(0.0, 0.08 - 0.06 * t + rng.gauss(0, 0.01)),
            "frac_reward_zero_std": max(0.0, 0.2 + 0.3 * t - 0.1 + rng.gauss(0, 0.03))}


def rollouts(step: int) -> dict:
    groups = [{"index": i, "prompt": prompt, "completions": [
        {"text": good, "rewards": {"accuracy": 1.0}, "total": 1.0, "advantage": 0.87,
         "length": len(good.split()), "truncated": False},
        {"text": bad, "rewards": {"accuracy": 0.0}, "total": 0.0, "advantage": -0.87,
         "length": len(bad.split()), "truncated": False}]} for i, (prompt, good, bad) in enumerate(PROMPTS)]
    return {"step": step, "groups": groups}


def report_run(live: Stack, name: str, lr_scale: float, seed: int) -> int:
    """A finished run, reported over HTTP with its ticket as a training process would."""
    engine = make_engine(live.database_url)
    with Session(engine) as db:
        run, ticket = service.create_run(db, spec=RunSpec(
            name=name, model="Qwen/Qwen2.5-0.5B-Instruct", max_steps=STEPS, learning_rate=1e-6 * lr_scale))
        db.commit()
        run_id = run.id
    engine.dispose()
    claim = httpx.post(f"{live.url}/api/runs/{run_id}/claim", json={},
                       headers={"Authorization": f"Bearer {ticket}"})
    claim.raise_for_status()
    headers = {"Authorization": f"Bearer {claim.json()['token']}"}
    rng = random.Random(seed)
    for start in range(1, STEPS + 1, 50):
        rows = [{"step": s, "metrics": metrics(s, lr_scale, rng)} for s in range(start, start + 50)]
        body = {"rows": rows, "rollouts": [rollouts(start + 49)]}
        httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json=body, headers=headers,
                   timeout=30).raise_for_status()
    httpx.post(f"{live.url}/api/runs/{run_id}/finished", json={"returncode": 0},
               headers=headers).raise_for_status()
    return run_id


def shoot(live: Stack, calm: int, hot: int) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        for name, path in (("run", f"/runs/{hot}"), ("compare", f"/runs/compare?ids={calm},{hot}"),
                           ("runs-list", "/runs")):
            page.goto(live.url + path)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(500)  # plotly's first frame
            page.mouse.move(0, 0)  # no hover label, no toolbar
            page.screenshot(path=str(OUT / f"{name}.png"))
            print(OUT / f"{name}.png", (OUT / f"{name}.png").stat().st_size // 1024, "KB")
        browser.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        live = Stack(f"sqlite:///{work / 'grpodeck.db'}", f"sqla+sqlite:///{work / 'broker.db'}",
                     work).start()
        try:
            calm = report_run(live, "gsm8k-qwen0.5b-lr1e-6", 1.0, seed=1)
            hot = report_run(live, "gsm8k-qwen0.5b-lr3e-6", 3.0, seed=2)
            shoot(live, calm, hot)
        finally:
            live.stop()


if __name__ == "__main__":
    main()
