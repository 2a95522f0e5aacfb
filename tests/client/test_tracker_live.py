"""``grpodeck.client.init`` (the tracker for any loop) against a real GRPO Deck (uvicorn +
SQLite, tests/stack.py): a plain PyTorch loop as its own process, cancel -> ``should_stop``,
the context manager on an exception, exactly-once delivery across a web outage, the server's
refusals, ``strict`` on a wrong key and an unreachable Deck, and verl's backend interface."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from app.core.config import ROOT
from app.importers import keyvalue
from bench.simulated_logs import verl_collapse
from grpodeck.client import DeckRefused, DeckUnavailable, init
from grpodeck.client.rundir import find
from grpodeck.client.verl import DeckTracking
from tests.client.test_callback_live import deck, loss_series  # noqa: F401  (fixture)
from tests.locked_stack import locked_stack
from tests.stack import Stack, free_port

LOOP = Path(__file__).with_name("torch_loop.py")


def tagged(live: Stack, tag: str) -> list[dict]:  # type: ignore[type-arg]
    return httpx.get(f"{live.url}/api/runs", params={"tag": tag, "archived": "all"},
                     timeout=10).json()


def test_a_plain_pytorch_loop_reports_through_init_log_finish(deck: Stack,  # noqa: F811
                                                              tmp_path: Path) -> None:
    out = tmp_path / "loop.json"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}"}
    done = subprocess.run([sys.executable, str(LOOP), "--url", deck.url, "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(out.read_text())
    run = deck.run(result["run"])
    assert (run["status"], run["source"], result["status"]) == ("succeeded", "external",
                                                                "succeeded")
    assert run["spec"]["lr"] == 0.05 and run["spec"]["model.kind"] == "linear"
    assert run["spec"]["group"] == "plain-torch"
    steps, values = loss_series(deck, result["run"])
    assert steps == list(range(1, 9))
    assert values == pytest.approx(result["losses"], rel=1e-6)
    assert values[-1] < values[0]  # the optimizer really trained
    assert [r["id"] for r in tagged(deck, "group:plain-torch")] == [result["run"]]
    assert [r["id"] for r in tagged(deck, "recipe")] == [result["run"]]


def test_should_stop_turns_true_after_the_run_is_cancelled_from_the_api(
        deck: Stack, tmp_path: Path) -> None:  # noqa: F811
    run = init(deck.url, "cancel-me-loop", spool_dir=tmp_path, flush_seconds=0.2)
    run.log({"loss": 1.0}, step=1)
    assert not run.should_stop and run.stopped_reason is None
    assert httpx.post(f"{deck.url}/api/runs/{run.id}/cancel", timeout=10).status_code == 200
    deck.wait_until(lambda: run.should_stop, "the sender's heartbeat brings the stop",
                    timeout=60)
    assert run.stopped_reason == "cancelled"
    assert run.finish() == "cancelled"
    assert deck.run(run.id)["status"] == "cancelled"


def test_the_context_manager_marks_the_run_failed_with_the_exception(
        deck: Stack, tmp_path: Path) -> None:  # noqa: F811
    run = init(deck.url, "crashes", spool_dir=tmp_path, flush_seconds=0.2)
    with pytest.raises(ZeroDivisionError), run:
        run.log({"loss": 2.0})
        run.log({"loss": 1.5})
        _ = 1 / 0
    ended = deck.run(run.id)
    assert ended["status"] == "failed", ended
    assert "ZeroDivisionError" in ended["error"] and "division by zero" in ended["error"]
    assert loss_series(deck, run.id) == ([0, 1], [2.0, 1.5])  # step defaults count from 0


def test_every_row_arrives_once_when_the_web_app_is_down_mid_run(
        deck: Stack, tmp_path: Path) -> None:  # noqa: F811
    run = init(deck.url, "outage-loop", spool_dir=tmp_path, flush_seconds=0.2)
    values = {step: 1.0 / step for step in range(1, 31)}
    try:
        for step in range(1, 11):
            run.log({"loss": values[step]}, step=step)
        deck.wait_until(lambda: deck.run(run.id)["step"] >= 10, "the first rows arrive")
        deck.kill("web")
        deck.wait_until(lambda: run.sender is not None and run.sender.state.failures > 0,
                        "the sender sees the outage", timeout=60)
        for step in range(11, 21):  # logged while nothing answers: spooled, never lost
            run.log({"loss": values[step]}, step=step)
        deck.start_web()
        for step in range(21, 31):
            run.log({"loss": values[step]}, step=step)
        assert run.finish() == "succeeded"
    finally:
        if deck.named["web"].poll() is not None:
            deck.start_web()
    steps, got = loss_series(deck, run.id)
    assert steps == list(range(1, 31))
    assert got == pytest.approx([values[s] for s in steps])


def test_refused_options_raise_with_the_server_reason(deck: Stack,  # noqa: F811
                                                      tmp_path: Path) -> None:
    names = {r["name"] for r in httpx.get(f"{deck.url}/api/runs", timeout=10).json()}
    with pytest.raises(DeckRefused, match=r"body\.tags: tag 'no spaces!'"):
        init(deck.url, "bad-tag", tags=["no spaces!"], spool_dir=tmp_path)
    with pytest.raises(DeckRefused, match=r"body\.alerts\.urls\.0: .*metadata"):
        init(deck.url, "bad-alert", spool_dir=tmp_path,
             alerts={"urls": ["webhook+http://169.254.169.254/hook"]})
    after = {r["name"] for r in httpx.get(f"{deck.url}/api/runs", timeout=10).json()}
    assert after == names  # nothing stored


def test_strict_raises_at_once_on_an_unreachable_deck(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(DeckUnavailable, match="cannot be reached"):
        init(url, "nowhere", strict=True, spool_dir=tmp_path)
    quiet = init(url, "nowhere", spool_dir=tmp_path, finish_deadline=0.5,  # not strict:
                 system_metrics=False)
    quiet.log({"loss": 1.0}, step=1)  # trains on, the run kept for later (test_offline_live)
    assert quiet.id is None and quiet.finish() is None and not quiet.should_stop
    (spool,) = find(tmp_path)  # strict left nothing behind
    assert [json.loads(line)["step"] for line in spool.metrics_path.read_text().splitlines()
            ] == [1]


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with locked_stack(tmp_path_factory.mktemp("locked")) as stack:
        yield stack


def test_strict_raises_at_once_on_a_wrong_api_key(locked: Stack, tmp_path: Path) -> None:
    with pytest.raises(DeckUnavailable, match=r"refused the credentials \(401\)"):
        init(locked.url, "wrong-key", api_key="gd_wrong", strict=True, spool_dir=tmp_path)


def test_verl_tracking_backend_reports_logs_and_finishes(deck: Stack,  # noqa: F811
                                                         tmp_path: Path) -> None:
    """verl's ``Tracking`` calls ``backend.log(data=..., step=...)`` for each step and
    ``finish`` at the end (verl itself is not installed here: see the README)."""
    backend = DeckTracking("verl-project", "verl-exp", config={"actor": {"lr": 1e-6}},
                           url=deck.url, spool_dir=tmp_path, flush_seconds=0.2)
    for step in (1, 2, 3):
        backend.log(data={"actor/pg_loss": 0.5 / step, "critic/score/mean": float(step)},
                    step=step)
    assert backend.finish() == "succeeded"
    run = deck.run(backend.run.id)
    assert (run["name"], run["status"], run["spec"]["actor.lr"]) == ("verl-exp", "succeeded",
                                                                     1e-6)
    series = httpx.get(f"{deck.url}/api/runs/{run['id']}/metrics",
                       params={"names": "reward,critic/score/mean"}, timeout=10).json()
    assert series["reward"]["values"] == [1.0, 2.0, 3.0]  # verl's task score, read as reward
    assert "critic/score/mean" not in series
    assert [r["id"] for r in tagged(deck, "group:verl-project")] == [run["id"]]


def findings(live: Stack, run_id: int) -> dict:  # type: ignore[type-arg]
    return httpx.get(f"{live.url}/api/runs/{run_id}/findings", timeout=10).json()  # type: ignore[no-any-return]


def test_a_live_verl_run_is_read_with_verls_names_and_diagnosed(deck: Stack,  # noqa: F811
                                                                tmp_path: Path) -> None:
    """Issue 31: the verdict of a live verl run was ``unknown`` (its names were read as TRL's).
    120 steps of a simulated verl run whose task score collapses, as verl's ``Tracking`` hands
    them to each backend (``log(data=..., step=...)``, numpy scalars)."""
    rows = keyvalue.parse(verl_collapse(), "verl.log", verl=True).rows
    backend = DeckTracking("verl-project", "verl-collapse", url=deck.url, spool_dir=tmp_path,
                           flush_seconds=0.2)
    for step, data in rows:
        backend.log(data={k: np.float64(v) for k, v in data.items()}, step=step)
    assert backend.finish() == "succeeded"
    report = findings(deck, backend.run.id)
    assert {"reward", "entropy", "kl"} <= set(report["metrics"]), report
    assert report["verdict"] != "unknown" and report["vocabulary"] == "verl"
    assert report["read_as"]["critic/score/mean"] == "reward"
    assert report["read_as"]["actor/entropy"] == "entropy"
    assert report["read_as"]["actor/kl_loss"] == "kl"


def test_metric_map_on_init_reads_a_loops_own_names(deck: Stack,  # noqa: F811
                                                     tmp_path: Path) -> None:
    run = init(deck.url, "mapped-loop", metric_map={"mean_reward": "reward"},
               spool_dir=tmp_path, flush_seconds=0.2, system_metrics=False)
    for step in range(1, 6):
        run.log({"mean_reward": 0.1 * step, "loss": 1.0 / step}, step=step)
    assert run.finish() == "succeeded"
    series = httpx.get(f"{deck.url}/api/runs/{run.id}/metrics", timeout=10).json()
    assert series["reward"]["values"] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert "mean_reward" not in series
    report = findings(deck, run.id)
    assert report["read_as"] == {"mean_reward": "reward"} and "reward" in report["metrics"]
