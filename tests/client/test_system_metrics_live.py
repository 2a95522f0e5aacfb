"""System metrics of runs reported from outside the dashboard, against a real Deck (uvicorn +
SQLite, tests/stack.py): ``grpodeck.client.init`` from a loop, ``DeckCallback`` driven as a
Trainer drives it, and ``system_metrics=False``."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from transformers import TrainerControl, TrainerState, TrainingArguments

from grpodeck.client import DeckCallback, init
from tests.client.test_callback_live import deck  # noqa: F401  (fixture)
from tests.stack import Stack


def series(live: Stack, run_id: int | None) -> dict:  # type: ignore[type-arg]
    return httpx.get(f"{live.url}/api/runs/{run_id}/metrics", timeout=10).json()


def test_a_loop_reported_with_init_gets_system_metrics(deck: Stack,  # noqa: F811
                                                       tmp_path: Path) -> None:
    with init(deck.url, "system-loop", spool_dir=tmp_path, flush_seconds=0.2,
              system_seconds=0.1) as run:
        for step in range(1, 6):
            time.sleep(0.15)
            run.log({"loss": 1.0 / step, "num_tokens": 1_000 * step}, step=step)
    got = series(deck, run.id)
    assert {"system/cpu_percent", "system/rss_bytes"} <= set(got)
    cpu_steps = got["system/cpu_percent"]["steps"]
    # before the first log a sample carries step 0; then the latest logged step
    assert set(cpu_steps) <= {0, 1, 2, 3, 4, 5} and cpu_steps[-1] == 5 and len(cpu_steps) >= 3
    assert all(v > 10e6 for v in got["system/rss_bytes"]["values"])
    rates = got["system/tokens_per_s"]
    assert rates["steps"] == [2, 3, 4, 5]
    assert all(1_000 < v < 1_000 / 0.15 for v in rates["values"])  # ~1000 tokens per ~0.15 s


def test_deck_callback_samples_while_the_trainer_logs(deck: Stack,  # noqa: F811
                                                      tmp_path: Path) -> None:
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=3, logging_steps=1,
                             report_to=[])
    state, control = TrainerState(max_steps=3), TrainerControl()
    callback = DeckCallback(url=deck.url, name="system-callback", flush_seconds=0.2,
                            system_seconds=0.05)
    callback.on_train_begin(args, state, control)
    for step in (1, 2, 3):
        state.global_step = step
        time.sleep(0.2)
        callback.on_log(args, state, control, logs={"loss": 0.5, "num_tokens": 500.0 * step})
    callback.on_train_end(args, state, control)
    assert callback.run is not None and callback.run.sampler is None  # closed with the run
    got = series(deck, callback.run.id)
    assert got["system/rss_bytes"]["steps"][-1] == 3
    assert got["system/tokens_per_s"]["steps"] == [2, 3]


def test_system_metrics_false_reports_none(deck: Stack, tmp_path: Path) -> None:  # noqa: F811
    with init(deck.url, "no-system", spool_dir=tmp_path, flush_seconds=0.2,
              system_metrics=False, system_seconds=0.05) as run:
        for step in range(1, 4):
            time.sleep(0.1)
            run.log({"loss": 1.0, "num_tokens": 10 * step}, step=step)
    got = series(deck, run.id)
    assert "loss" in got and not [name for name in got if name.startswith("system/")]
