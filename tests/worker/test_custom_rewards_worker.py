"""The worker refuses an unregistered ``custom`` reward again, before importing it, and reads
the ``grpodeck.rewards`` entry point group of installed distributions (issue 22, point 3)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpodeck.contract import custom_rewards
from grpodeck.contract.spec import RunSpec
from tests.conftest import tiny_spec
from worker.rewards.text import custom
from worker.training.child import train


@pytest.mark.parametrize("path", ["os:system", "subprocess:check_output", "builtins:eval",
                                  "tests.rewards.planted_reward:score"])
def test_the_worker_refuses_an_unregistered_function_without_importing_it(path: str) -> None:
    os.environ.pop("GRPODECK_TEST_PLANTED_IMPORTED", None)
    with pytest.raises(ValueError, match="refused on this worker"):
        custom(path)
    assert "tests.rewards.planted_reward" not in sys.modules
    assert "GRPODECK_TEST_PLANTED_IMPORTED" not in os.environ


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """A real installed distribution (its dist-info on sys.path) registering a reward."""
    info = tmp_path / "deck_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deck-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[grpodeck.rewards]\nplanted = tests.rewards.planted_reward:score\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))


def test_an_entry_point_registers_a_reward(installed_plugin: None) -> None:
    allowed = {r.path: r for r in custom_rewards.registered()}
    planted = allowed["tests.rewards.planted_reward:score"]
    assert planted.name == "planted" and planted.source == "entry point grpodeck.rewards"
    assert custom("tests.rewards.planted_reward:score")(completions=["a", "b"]) == [1.0, 1.0]


def test_a_registered_reward_trains_end_to_end(receiver, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = tiny_spec(max_steps=1, rewards=[
        {"name": "custom", "weight": 1.0,
         "params": {"path": "tests.rewards.custom_reward:shout"}}])
    train(spec, 31, receiver.url, "t", str(tmp_path))
    steps = [r["metrics"] for r in receiver.rows if "loss" in r["metrics"]]
    assert len(steps) == 1
    assert steps[0]["rewards/custom/mean"] == 0.0  # random tokens are not all capitals


def test_a_spec_the_web_side_allowed_is_refused_by_a_worker_that_did_not_register_it(
        receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Web and worker deployments list their own rewards: the worker's list has the last word."""
    monkeypatch.setenv("GRPODECK_CUSTOM_REWARDS", "tests.rewards.planted_reward:score")
    os.environ.pop("GRPODECK_TEST_PLANTED_IMPORTED", None)
    spec = RunSpec.model_validate(tiny_spec(max_steps=1, rewards=[
        {"name": "custom", "weight": 1.0, "params": {"path": "tests.rewards.planted_reward:score"}}]))
    monkeypatch.setenv("GRPODECK_CUSTOM_REWARDS", "tests.rewards.custom_reward:shout")
    with pytest.raises(ValueError, match="refused on this worker"):
        train(spec, 32, receiver.url, "t", str(tmp_path))
    assert not [r for r in receiver.rows if "loss" in r["metrics"]]
    assert "GRPODECK_TEST_PLANTED_IMPORTED" not in os.environ
