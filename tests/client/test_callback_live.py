"""DeckCallback on a plain TRL script (its own ``python`` process, stock ``GRPOTrainer``, the
tiny offline model) reporting to a real GRPO Deck (uvicorn + SQLite, tests/stack.py)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.core.config import ROOT
from tests.integration.conftest import live_stack
from tests.stack import Stack, free_port

SCRIPT = Path(__file__).with_name("train_script.py")
CLIENT_TIMEOUT_S = 5.0  # train_script.py's DeckCallback timeout


@pytest.fixture(scope="module")
def deck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with live_stack("embedded", tmp_path_factory.mktemp("deck")) as live:
        yield live


@pytest.fixture(scope="module")
def model_dir() -> str:
    from worker.training.models import ensure_builtin

    return str(ensure_builtin("builtin:tiny-random"))


def start_script(deck: Stack | str, model: str, out: Path, name: str, steps: int,
                 *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    url = deck if isinstance(deck, str) else deck.url
    cmd = [sys.executable, str(SCRIPT), "--model", model, "--url", url, "--name", name,
           "--out", str(out), "--steps", str(steps), *extra]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'clients' / 'python'}",
           "HF_HUB_OFFLINE": "1", **(env or {})}
    # Output goes to a file, not a pipe: TRL prints every step's logs, and a pipe nobody reads
    # until the end fills up (64 KB) and blocks the training loop, which the outage test
    # would then blame on the callback.
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / f"{name}.log").open("w") as log:
        proc = subprocess.Popen(cmd, cwd=out.parent, env=env, stdout=log,
                                stderr=subprocess.STDOUT, text=True)
    proc.log_path = out.parent / f"{name}.log"  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> str:
    proc.wait(timeout=timeout)
    output = proc.log_path.read_text()  # type: ignore[attr-defined]
    assert proc.returncode == 0, output[-4000:]
    return output


def run_id_of(output: str) -> int:
    line = next(x for x in output.splitlines() if "GRPO Deck: run" in x and "live at" in x)
    return int(line.split("GRPO Deck: run ")[1].split()[0])


def find_run(deck: Stack, name: str) -> dict | None:  # type: ignore[type-arg]
    runs = httpx.get(f"{deck.url}/api/runs", timeout=10).json()
    return next((r for r in runs if r["name"] == name), None)


def loss_series(deck: Stack, run_id: int) -> tuple[list[int], list[float]]:
    series = httpx.get(f"{deck.url}/api/runs/{run_id}/metrics", params={"names": "loss"},
                       timeout=10).json()["loss"]
    return series["steps"], series["values"]


def test_a_plain_trl_script_reports_its_run_live_with_rollouts_and_ends_succeeded(
        deck: Stack, model_dir: str, tmp_path: Path) -> None:
    out = finish(start_script(deck, model_dir, tmp_path / "out", "plain-script", 4))
    run_id = run_id_of(out)
    run = deck.run(run_id)
    assert (run["status"], run["source"], run["max_steps"]) == ("succeeded", "external", 4)
    assert run["spec"]["num_generations"] == 4 and run["spec"]["model"] == model_dir
    logged = json.loads((tmp_path / "out" / "logged.json").read_text())
    steps, values = loss_series(deck, run_id)
    assert steps == [r["step"] for r in logged] == [1, 2, 3, 4]
    assert values == pytest.approx([r["loss"] for r in logged], rel=1e-6, abs=1e-9)
    captured = httpx.get(f"{deck.url}/api/runs/{run_id}/rollouts", timeout=10).json()
    assert captured["steps"] == [1, 2, 3, 4]
    group = captured["groups"][0]
    assert len(group["completions"]) == 4
    advantages = [c["advantage"] for c in group["completions"]]
    assert sum(advantages) == pytest.approx(0, abs=1e-4)  # GRPO: centred within the group
    assert "metrics only" not in out
    assert json.loads((tmp_path / "out" / "deck.json").read_text()) == {"stopped_reason": None}


def test_tags_group_and_alert_rules_reach_the_run(deck: Stack, model_dir: str,
                                                   tmp_path: Path) -> None:
    """DeckCallback's launch-form options: the tags and group filter the runs list, the alert
    rules are the run's own (as a launched run's spec holds them)."""
    hook = "webhook+https://hooks.example.com/deck"
    out = finish(start_script(deck, model_dir, tmp_path / "out", "tagged-script", 2,
                              "--tags", "baseline,trl", "--group", "ablation-1",
                              "--alert-url", hook))
    run = deck.run(run_id_of(out))
    assert run["status"] == "succeeded"
    masked = "webhook+https://hooks.example.com/***"  # the API never echoes a destination
    assert run["spec"]["alerts"] == {"urls": [masked], "min_severity": "critical", "ignore": []}
    for tag in ("baseline", "trl", "group:ablation-1"):
        found = httpx.get(f"{deck.url}/api/runs", params={"tag": tag}, timeout=10).json()
        assert [r["id"] for r in found] == [run["id"]], tag


def test_a_refused_alert_destination_fails_the_script_before_training(
        deck: Stack, model_dir: str, tmp_path: Path) -> None:
    proc = start_script(deck, model_dir, tmp_path / "out", "bad-alert-script", 2,
                        "--alert-url", "webhook+http://169.254.169.254/latest")
    proc.wait(timeout=300)
    output = proc.log_path.read_text()  # type: ignore[attr-defined]
    assert proc.returncode != 0
    assert "DeckRefused" in output and "body.alerts.urls.0" in output, output[-3000:]
    assert find_run(deck, "bad-alert-script") is None
    assert not (tmp_path / "out" / "logged.json").exists()  # no step was trained


def test_strict_fails_fast_on_an_unreachable_deck(model_dir: str, tmp_path: Path) -> None:
    """``strict=True``: train() raises at train begin instead of training unreported."""
    proc = start_script(f"http://127.0.0.1:{free_port()}", model_dir, tmp_path / "out", "strict-nowhere", 200, "--strict")
    proc.wait(timeout=300)
    output = proc.log_path.read_text()  # type: ignore[attr-defined]
    assert proc.returncode != 0 and "DeckUnavailable" in output, output[-3000:]
    assert "cannot be reached" in output
    assert not (tmp_path / "out" / "logged.json").exists()


def test_a_cancel_from_the_deck_stops_the_script(deck: Stack, model_dir: str,
                                                  tmp_path: Path) -> None:
    proc = start_script(deck, model_dir, tmp_path / "out", "cancel-me", 500)
    try:
        deck.wait_until(lambda: (r := find_run(deck, "cancel-me")) is not None
                        and r["step"] >= 2, "the script's run reports steps", timeout=180)
        run = find_run(deck, "cancel-me")
        assert run is not None
        assert httpx.post(f"{deck.url}/api/runs/{run['id']}/cancel",
                          timeout=10).status_code == 200
        finish(proc, timeout=120)
    finally:
        proc.kill()
    ended = deck.run(run["id"])
    assert ended["status"] == "cancelled" and ended["step"] < 100
    stopped = json.loads((tmp_path / "out" / "deck.json").read_text())["stopped_reason"]
    assert stopped == "cancelled"
    logged = json.loads((tmp_path / "out" / "logged.json").read_text())
    assert logged[-1]["step"] < 100


def _pause_web(deck: Stack, sig: int) -> None:
    os.killpg(deck.named["web"].pid, sig)


STEPS = 120  # enough that steps run before, during and (under load too) after the outage


def test_web_down_mid_run_every_row_arrives_once_and_steps_never_wait(
        deck: Stack, model_dir: str, tmp_path: Path) -> None:
    """The web app frozen (SIGSTOP: connections hang, the worst case for a waiting client) for
    10 s, then killed and restarted: rows arrive exactly once, and no step waited on the frozen
    server (a step that did would last the client's whole request timeout, or until the
    server thawed: the timeout plus the step's own work, so longer than the timeout plus the
    quickest step outside the outage; a bound on the step time alone failed on load, not on the
    code: a loaded machine's step once took 5.05 s against the 5 s timeout)."""
    times = tmp_path / "times.jsonl"
    # The outage may outlast the script's last step: by default finish would then give up
    # within seconds and leave the rest to `sync` (tests/client/test_bad_days.py); this test
    # asks it to wait for the Deck's return, as a script may (issue 55).
    proc = start_script(deck, model_dir, tmp_path / "out", "outage", STEPS, "--times", str(times),
                        env={"GRPODECK_FINISH_TIMEOUT": "120"})
    try:
        deck.wait_until(lambda: (r := find_run(deck, "outage")) is not None and r["step"] >= 5,
                        "the script's run reports steps", timeout=180)
        _pause_web(deck, signal.SIGSTOP)
        start = time.monotonic()
        time.sleep(10)
        _pause_web(deck, signal.SIGCONT)
        deck.kill("web")
        time.sleep(3)
        end = time.monotonic()
        deck.start_web()
        out = finish(proc, timeout=300)
    finally:
        proc.kill()
        if deck.named["web"].poll() is not None:
            deck.start_web()
    run_id = run_id_of(out)
    logged = json.loads((tmp_path / "out" / "logged.json").read_text())
    steps, values = loss_series(deck, run_id)
    assert steps == [r["step"] for r in logged] == list(range(1, STEPS + 1))
    assert values == pytest.approx([r["loss"] for r in logged], rel=1e-6, abs=1e-9)
    assert deck.run(run_id)["status"] == "succeeded"
    marks = [json.loads(x) for x in times.read_text().splitlines()]
    gaps = [(b["t"] - a["t"], a["t"]) for a, b in itertools.pairwise(marks)]
    during = [g for g, t in gaps if start <= t <= end]
    normal = [g for g, t in gaps if not start <= t <= end]
    assert len(during) >= 3, "the outage must cover several steps"
    assert len(normal) >= 3, "steps outside the outage are the baseline"
    assert max(during) < CLIENT_TIMEOUT_S + min(normal), (during, normal)


def test_the_callback_works_next_to_trackio_in_the_same_script(
        deck: Stack, model_dir: str, tmp_path: Path) -> None:
    """``report_to="trackio"`` and DeckCallback together: both get every step, neither fails."""
    import sqlite3

    store = tmp_path / "trackio"
    out = finish(start_script(deck, model_dir, tmp_path / "out", "with-trackio", 3, "--trackio",
                              env={"TRACKIO_DIR": str(store), "TRACKIO_PROJECT": "deck-test"}))
    run_id = run_id_of(out)
    assert deck.run(run_id)["status"] == "succeeded"
    assert loss_series(deck, run_id)[0] == [1, 2, 3]
    databases = list(store.glob("*.db"))
    assert databases, f"trackio wrote no project under {store}: {list(store.iterdir())}"
    with sqlite3.connect(databases[0]) as db:  # trackio's store: one JSON document per log
        rows = [(step, json.loads(doc)) for step, doc in db.execute("SELECT step, metrics "
                                                                   "FROM metrics")]
    tracked = {step: m["train/loss"] for step, m in rows if "train/loss" in m}
    steps, values = loss_series(deck, run_id)
    assert dict(zip(steps, values, strict=True)) == pytest.approx(tracked)


def test_the_guard_rail_stops_an_external_run_with_its_reason(deck: Stack, model_dir: str,
                                                              tmp_path: Path) -> None:
    """A constant reward (zero spread in every group) is critical; with ``stop_on_critical`` the
    Deck's answer stops the script as it stops a worker's run."""
    out = finish(start_script(deck, model_dir, tmp_path / "out", "railed", 500, "--guard-rail"),
                 timeout=300)
    run = deck.run(run_id_of(out))
    assert run["status"] == "cancelled" and run["spec"]["stop_on_critical"] is True, run
    assert run["stop_reason"].startswith("stopped by diagnostics: "), run
    finding = run["stop_reason"].removeprefix("stopped by diagnostics: ")
    stopped = json.loads((tmp_path / "out" / "deck.json").read_text())["stopped_reason"]
    assert stopped == f"guard_rail: {finding}"
    assert json.loads((tmp_path / "out" / "logged.json").read_text())[-1]["step"] < 100
