"""The client's parts without a server: what it may import, how logs become rows, and how
rollout capture degrades when TRL's internals are not what it reads."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpodeck.client import rollouts
from grpodeck.client.callback import DeckCallback, rows_from_logs
from tests.contract.test_boundaries import loaded_after_import

SERVER_STACK = {"fastapi", "starlette", "sqlalchemy", "celery", "kombu", "app", "worker"}


@pytest.mark.parametrize("module", ["grpodeck.client", "grpodeck.client.callback"])
def test_the_client_needs_no_server_stack(module: str) -> None:
    loaded = loaded_after_import(module)
    assert "grpodeck" in loaded and sorted(loaded & SERVER_STACK) == []


def test_importing_the_spool_does_not_load_transformers() -> None:
    """The worker's Celery process imports the spool; DeckCallback loads on first use."""
    assert "transformers" not in loaded_after_import("grpodeck.client.spool")


def test_logs_become_a_train_row_and_an_eval_row() -> None:
    rows = rows_from_logs(3, {"loss": 0.5, "reward": float("nan"), "eval_loss": float("inf"),
                              "note": "text", "flag": True})
    assert rows == [{"step": 3, "metrics": {"loss": 0.5, "reward": "nan"}},
                    {"step": 3, "metrics": {"eval_loss": "inf"}}]


@pytest.mark.parametrize("logs, rows", [
    ({"loss": 0.5, "reward": 1.0}, [{"step": 3, "metrics": {"loss": 0.5, "reward": 1.0}}]),
    ({"loss": 0.5, "eval_loss": 1.0}, [{"step": 3, "metrics": {"loss": 0.5}},
                                       {"step": 3, "metrics": {"eval_loss": 1.0}}]),
    ({"loss": 0.5, "reward": -float("inf")}, [{"step": 3, "metrics": {"loss": 0.5,
                                                                     "reward": "-inf"}}]),
    ({"loss": 1e308, "reward": 1e308}, [{"step": 3, "metrics": {"loss": 1e308,
                                                               "reward": 1e308}}]),
    ({"loss": 0.5, 7: 1.0}, [{"step": 3, "metrics": {"loss": 0.5}}]),
])
def test_an_all_float_log_of_known_keys_is_read_as_any_other(
        logs: dict, rows: list[dict]) -> None:
    """The fast path for a trainer's usual log (every value a finite float, the same keys
    each step: no value converted one by one) splits, encodes and drops exactly as the slow
    one, the second time a key set is seen as the first."""
    for _ in range(2):
        assert rows_from_logs(3, dict(logs)) == rows


def _trainer(**logs: object) -> SimpleNamespace:
    weights = SimpleNamespace(tolist=lambda: [1.0])
    return SimpleNamespace(_logs=logs, num_generations=2, reward_func_names=["r"],
                           reward_weights=weights)


def test_groups_come_from_a_stock_trainers_logs() -> None:
    trainer = _trainer(prompt=["p"] * 4, completion=["a", "b", "c", "d"],
                       rewards={"r": [1.0, 0.0, 0.5, float("nan")]},
                       advantages=[0.7, -0.7, 0.0, 0.0])
    groups = rollouts.from_trainer_logs(trainer, max_groups=1)
    assert [c["text"] for c in groups[0]["completions"]] == ["a", "b"]
    assert [c["advantage"] for c in groups[0]["completions"]] == [0.7, -0.7]
    assert groups[0]["completions"][0]["length"] is None  # unknown from a stock trainer


def test_changed_trl_internals_mean_metrics_only_with_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    deck = DeckCallback(url="http://127.0.0.1:9")
    deck._trainer = _trainer(prompt=["p"] * 2)  # no completions/advantages: another TRL layout
    with caplog.at_level(logging.WARNING, logger="grpodeck.client"):
        for step in range(1, 4):
            deck._capture(step)
    warnings = [r for r in caplog.records if "metrics only" in r.getMessage()]
    assert len(warnings) == 1


def test_two_writers_recording_acknowledgements_at_once_never_corrupt_the_count(
        tmp_path: Path) -> None:
    """A dying child's last words and its sender thread may both record at once."""
    import threading

    from grpodeck.client import spool

    path = tmp_path / "metrics.jsonl"
    spool.append(path, [{"step": s, "metrics": {"loss": 0.0}} for s in range(1, 1001)])
    counts = (7, 1000)
    errors: list[BaseException] = []

    def writer(count: int) -> None:
        try:
            for _ in range(2_000):
                spool.mark_acked(path, count)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(c,)) for c in counts]
    for thread in threads:
        thread.start()
    seen = set()
    while any(t.is_alive() for t in threads):
        seen.add(spool.acked(path))
    for thread in threads:
        thread.join()
    assert errors == [] and seen <= {0, *counts}, (errors, seen - {0, *counts})


def test_retry_after_reads_seconds_and_dates_and_bounds_them() -> None:
    from datetime import UTC, datetime

    import httpx

    from grpodeck.client.retry import MAX_WAIT_SECONDS, retry_after

    def reply(value: str | None) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": value} if value else {})

    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after(reply("5")) == 5
    assert retry_after(reply("Tue, 01 Dec 2026 12:00:07 GMT"), now) == 7
    assert retry_after(reply("86400")) == MAX_WAIT_SECONDS
    assert retry_after(reply("-3")) == 0
    assert retry_after(reply("soon")) is None and retry_after(reply(None)) is None


@pytest.mark.parametrize(("options", "says"), [
    ({"metric_map": {"acc": "reward", "score": "reward"}}, "both map to 'reward'"),
    ({"vocabulary": "deepspeed"}, "vocabulary"),
])
def test_a_bad_reading_is_refused_at_init_before_anything_is_sent(options: dict,  # type: ignore[type-arg]
                                                                  says: str,
                                                                  tmp_path: Path) -> None:
    from grpodeck.client import DeckRefused, init

    with pytest.raises(DeckRefused, match=says):  # port 9 (discard) would be unreachable
        init("http://127.0.0.1:9", "bad-map", spool_dir=tmp_path, **options)
