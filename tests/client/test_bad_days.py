"""Issue 55: the client must never hurt the training it serves. Each test is one of the
issue's probes, against a real Deck (uvicorn + SQLite, started by the test only while it
should answer) and, for the full disk, a real full file system (a 64 KB tmpfs):

- a spool folder that cannot be created (under a regular file, under /proc) is one warning;
  the run is sent from memory;
- a full disk (before ``init``, or during the run) is one warning; every step reaches the Deck
  and the run ends there;
- a script that ends while the Deck is down returns from ``finish`` within seconds (it waited
  120 s) and says in one line how to ``sync`` what is left, which ``sync`` then delivers;
- a run spooled while the Deck was down is registered within seconds of the Deck answering
  (it took ~25 s once the back-off had grown);
- corrupt spool lines (NUL bytes, bad UTF-8, JSON nested past any parser's depth, a negative
  acknowledged count) are dropped with a warning; every good row is delivered;
- a rollout value ``json`` cannot write (a ``Decimal`` reward) no longer ends the sender thread
  (it ended it, and nothing more was sent).

No test sleeps: each waits on recorded state (the sender's counters, the Deck's answers) with
a deadline; the bounds asserted are the behaviour itself (seconds in ``finish``, seconds to
registration).
"""

from __future__ import annotations

import errno
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from grpodeck.client import init
from grpodeck.client.rundir import find
from tests.client.test_offline_live import (
    ENV,
    LOOP,
    down,
    loss_steps,
    rollout_steps,
    runs_named,
    sync,
    up,
)
from tests.stack import Stack, migrated_sqlite

STEPS = 30


@pytest.fixture(scope="module")
def deck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A migrated Deck whose web app each test starts when it should answer."""
    with migrated_sqlite(tmp_path_factory.mktemp("bad-days-deck")) as live:
        yield live


def waited(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check()`` held (polled on recorded state); AssertionError past
    ``timeout``."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, f"not within {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - start


def log_steps(run: object, first: int, last: int) -> None:
    for step in range(first, last + 1):
        run.log({"loss": 1.0 / step}, step=step)  # type: ignore[attr-defined]


def assert_quiet(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
                 about: str) -> str:
    """No traceback anywhere; every client warning one line, without exc_info; one of them
    says ``about``. Returns what the client printed to stderr."""
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    records = [r for r in caplog.records if r.name.startswith("grpodeck")]
    assert all("\n" not in r.getMessage() and r.exc_info is None for r in records), records
    assert any(about in r.getMessage() for r in records), [r.getMessage() for r in records]
    return err


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_a_spool_folder_that_cannot_be_created_is_a_warning_and_the_run_is_sent(
        deck: Stack, tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    up(deck)
    (tmp_path / "a-file").write_text("not a folder")
    spool_dir = tmp_path / "a-file" / "spool" if where == "under-a-file" else Path(
        "/proc/grpodeck-spool")
    run = init(deck.url, f"no-spool-{where}", spool_dir=spool_dir, flush_seconds=0.2,
               system_metrics=False)
    log_steps(run, 1, STEPS)
    assert run.finish() == "succeeded"
    assert loss_steps(deck, run.id)[0] == list(range(1, STEPS + 1))
    assert_quiet(caplog, capfd, "spool")
    with pytest.raises(OSError):  # strict: refuse before any step is spent
        init(deck.url, "strict", spool_dir=spool_dir, strict=True, system_metrics=False)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KB file system (tmpfs), unmounted afterwards. Mounting needs root, as the
    project's machines and CI run: elsewhere the probe fails saying so (never skipped green)."""
    where = tmp_path / "tiny"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.fail(f"the full-disk probe mounts a tmpfs, which needs root: "
                    f"{done.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode:
            subprocess.run(["umount", "-l", str(where)], check=True)


def fill(disk: Path) -> None:
    """Write until the file system says it is full (ENOSPC)."""
    with (disk / "filler").open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


@pytest.mark.parametrize("when", ["before-init", "during-run"])
def test_a_full_disk_is_a_warning_and_every_step_reaches_the_deck(
        deck: Stack, tiny_disk: Path, when: str, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    up(deck)
    if when == "before-init":
        fill(tiny_disk)
    run = init(deck.url, f"full-disk-{when}", spool_dir=tiny_disk, flush_seconds=0.2,
               system_metrics=False)
    fill(tiny_disk)
    log_steps(run, 1, STEPS)
    assert run.finish() == "succeeded"
    assert loss_steps(deck, run.id)[0] == list(range(1, STEPS + 1))
    assert deck.run(run.id)["status"] == "succeeded"
    assert_quiet(caplog, capfd, "No space left on device")


def finish_seconds(run: object) -> tuple[float, str | None]:
    start = time.monotonic()
    status = run.finish()  # type: ignore[attr-defined]
    return time.monotonic() - start, status


@pytest.mark.parametrize("down_at", ["init", "mid-run"])
def test_finish_with_the_deck_down_returns_within_seconds_and_says_how_to_sync(
        deck: Stack, tmp_path: Path, down_at: str, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    """Default options: the script's last call must not hold the node for minutes."""
    name = f"finish-down-{down_at}"
    (down if down_at == "init" else up)(deck)
    run = init(deck.url, name, spool_dir=tmp_path, system_metrics=False)
    log_steps(run, 1, 10)
    if down_at == "mid-run":
        waited(lambda: run.sender.state.rows_delivered >= 10, 30)  # type: ignore[union-attr]
        down(deck)
    log_steps(run, 11, STEPS)
    seconds, status = finish_seconds(run)
    assert status is None
    assert seconds < 10, f"finish took {seconds:.1f} s with the Deck down"
    (spool,) = find(tmp_path)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    left = [line for line in err.splitlines() if "not delivered" in line]
    assert len(left) == 1 and f"grpodeck-client sync {spool.path}" in left[0], err
    up(deck)
    done = sync(tmp_path, deck.url)
    assert done.returncode == 0, done.stderr
    (stored,) = runs_named(deck, name)
    assert loss_steps(deck, stored["id"])[0] == list(range(1, STEPS + 1))
    assert deck.run(stored["id"])["status"] == "succeeded"


def test_a_run_spooled_while_the_deck_was_down_is_registered_within_seconds_of_its_return(
        deck: Stack, tmp_path: Path) -> None:
    """Default options; the outage lasts until the sender has failed four times (the back-off
    had then grown to 30 s between attempts)."""
    down(deck)
    run = init(deck.url, "back-soon", spool_dir=tmp_path, system_metrics=False)
    log_steps(run, 1, STEPS)
    sender = run.sender
    assert sender is not None
    waited(lambda: sender.state.failures >= 4, 120)
    assert run.id is None
    up(deck)
    seconds = waited(lambda: run.id is not None, 60)
    assert seconds < 5, f"registered {seconds:.1f} s after the Deck answered"
    waited(lambda: sender.state.rows_delivered >= STEPS, 30)
    assert run.finish() == "succeeded"
    assert loss_steps(deck, run.id)[0] == list(range(1, STEPS + 1))


CORRUPT_ROWS = [b"\0" * 40 + b"\n", b"\xff\xfe not utf-8\n", b"[" * 100_000 + b"\n",
                b"not json at all\n", b'{"step": "x", "metrics": {}}\n', b"42\n"]


def corrupt(spool_file: Path, bad: list[bytes]) -> None:
    """Put ``bad`` lines in the middle of the spool, NUL bytes at its end (what a power cut
    leaves), and a negative acknowledged count beside it."""
    lines = spool_file.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    spool_file.write_bytes(b"".join(lines[:half] + bad + lines[half:]) + b"\0" * 100)
    spool_file.with_name(spool_file.name + ".acked").write_text("-3")


def test_corrupt_spool_lines_are_dropped_with_a_warning_and_every_good_row_is_sent(
        deck: Stack, tmp_path: Path) -> None:
    down(deck)
    made = subprocess.run([sys.executable, str(LOOP), "--url", deck.url, "--spool",
                           str(tmp_path), "--name", "corrupt-spool", "--steps", str(STEPS),
                           "--rollout-every", "3"], env=ENV, capture_output=True, text=True,
                          timeout=300, check=False)
    assert made.returncode == 0, made.stderr[-3000:]
    (spool,) = find(tmp_path)
    corrupt(spool.metrics_path, CORRUPT_ROWS)
    corrupt(spool.rollouts_path, [b"\0" * 40 + b"\n", b"[" * 100_000 + b"\n"])
    up(deck)
    done = subprocess.run([sys.executable, "-m", "grpodeck.client.cli", "sync", str(tmp_path),
                           "--url", deck.url, "--deadline", "30"], env=ENV,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "dropping" in done.stderr, done.stderr[-3000:]
    (stored,) = runs_named(deck, "corrupt-spool")
    assert loss_steps(deck, stored["id"])[0] == list(range(1, STEPS + 1))
    ended = deck.run(stored["id"])["status"]  # sync delivered all it could, then the end
    assert ended == "succeeded", done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]


def test_an_unreadable_registration_is_one_error_line(deck: Stack, tmp_path: Path) -> None:
    down(deck)
    made = subprocess.run([sys.executable, str(LOOP), "--url", deck.url, "--spool",
                           str(tmp_path), "--steps", "3"], env=ENV, capture_output=True,
                          text=True, timeout=300, check=False)
    assert made.returncode == 0, made.stderr[-3000:]
    (spool,) = find(tmp_path)
    (spool.path / "registered.json").write_text('{"id": "not a number"}')
    up(deck)
    done = sync(tmp_path, deck.url)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "registered.json" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_rollout_value_json_cannot_write_does_not_stop_the_sender(
        deck: Stack, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    up(deck)
    run = init(deck.url, "odd-values", spool_dir=tmp_path, flush_seconds=0.2,
               system_metrics=False)
    for step in range(1, STEPS + 1):
        run.log({"loss": 1.0 / step}, step=step)
        run.log_rollouts(step, [{"index": 0, "prompt": f"p{step}", "completions": [
            {"text": "a", "rewards": {"correct": Decimal("0.5")}, "advantage": 0.0}]}])
    assert run.finish() == "succeeded"
    assert loss_steps(deck, run.id)[0] == list(range(1, STEPS + 1))
    assert rollout_steps(deck, run.id) == list(range(1, STEPS + 1))
    assert "Traceback" not in capfd.readouterr().err


@pytest.fixture(autouse=True)
def _client_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="grpodeck.client")
