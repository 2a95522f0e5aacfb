"""The training child's environment (``worker.tasks.child_env``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from transformers.integrations import is_mlflow_available

from worker.tasks import child_env
from worker.training.child import TOKEN_ENV


def test_the_child_trains_without_importing_mlflow_though_it_is_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child trains with ``report_to="none"``; without the switch, importing TRL imports
    MLflow wherever it is installed (~1 s of every run's start). The switch is transformers'
    own, read by the same check ``trl.extras.profiling`` makes before importing it."""
    assert importlib.util.find_spec("mlflow") is not None  # installed here (the benches)
    env = child_env("the-token", tmp_path, None)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert not is_mlflow_available()
    assert env[TOKEN_ENV] == "the-token"
