"""MLflow's own client (``mlflow==3.17.2``) starting runs without a name against a real Deck
(issue 56): each gets a distinct ``adjective-animal-NNN`` name, as MLflow's server gives, and
the client sees the name the Deck shows (they were all "mlflow run")."""

from __future__ import annotations

import re

import mlflow

from tests.client.test_callback_live import deck  # noqa: F401  (fixture)
from tests.client.test_mlflow_live import tracking  # noqa: F401  (fixture)
from tests.stack import Stack


def test_unnamed_runs_get_mlflow_style_names(deck: Stack, tracking: None) -> None:  # noqa: F811
    mlflow.set_tracking_uri(f"{deck.url}/mlflow")
    names = []
    for _ in range(3):
        with mlflow.start_run() as active:
            mlflow.log_metric("reward", 0.5, step=1)
        run = deck.run(int(active.info.run_id))
        assert run["name"] == active.info.run_name
        names.append(run["name"])
    assert all(re.fullmatch(r"[a-z]+-[a-z]+-\d{1,3}", n) for n in names), names
    assert len(set(names)) == 3, names
