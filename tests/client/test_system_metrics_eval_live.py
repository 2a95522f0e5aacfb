"""System samples keep coming while a run evaluates (issue 56, 7a): a stock TRL script with an
eval set (its own process, DeckCallback, tests/client/train_script.py) reporting to a real Deck;
the run page's system charts, drawn on the clock, show the samples taken during the evaluation,
not one point for the whole of it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.app.conftest import one
from tests.client.test_callback_live import deck, finish, model_dir, run_id_of, start_script  # noqa: F401
from tests.stack import Stack

EVERY_S = 0.2  # the sampler's interval ($GRPODECK_SYSTEM_SECONDS)


def test_system_samples_keep_coming_during_an_evaluation(
        deck: Stack, model_dir: str, tmp_path: Path) -> None:  # noqa: F811
    out = finish(start_script(deck, model_dir, tmp_path / "out", "eval-system", 2,
                              "--eval-prompts", "96", "--eval-steps", "2",
                              env={"GRPODECK_SYSTEM_SECONDS": str(EVERY_S)}))
    run_id = run_id_of(out)
    metrics = httpx.get(f"{deck.url}/api/runs/{run_id}/metrics",
                        params={"names": "eval_runtime"}, timeout=10).json()
    eval_s = metrics["eval_runtime"]["values"][0]  # TRL's own measure of the evaluation
    assert eval_s > 8 * EVERY_S, eval_s  # long enough to sample several times
    page = httpx.get(f"{deck.url}/runs/{run_id}", timeout=10).text
    cpu = json.loads(one(page, "#chart-system_cpu")["data-figure"])["data"][0]
    during = [t for t, text in zip(cpu["x"], cpu["text"], strict=True) if text == "step 2"]
    # step 2 is logged, then evaluated: every sample of the evaluation carries that step
    assert len(during) >= eval_s / EVERY_S / 3, (eval_s, len(during), cpu["text"])
    assert len(set(during)) == len(during)  # each at its own time
    assert max(during) - min(during) >= eval_s * 1000 / 2  # spread over the evaluation (ms)
