"""Which runs are live: queued and running ones. Live runs' pages poll for updates and the lost
check watches them; finished ones do neither."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.health.service import context_for
from app.runs import lifecycle
from app.runs.lifecycle import Status
from app.runs.models import Run
from tests.app.conftest import one, queued_run

LIVE = {Status.QUEUED: True, Status.RUNNING: True, Status.SUCCEEDED: False,
        Status.FAILED: False, Status.CANCELLED: False, Status.IMPORTED: False}


@pytest.mark.parametrize("status", list(Status))
def test_only_queued_and_running_runs_are_live(status: Status) -> None:
    run = Run(id=1, name="r", spec={}, status=status, max_steps=3, current_step=0)
    assert lifecycle.is_live(run) is LIVE[status]
    assert context_for(run).is_live is LIVE[status]  # what the lost check is told


def test_a_queued_runs_page_keeps_polling_until_it_ends(client: TestClient) -> None:
    run_id, _ = queued_run()
    poll = f'hx-get="/runs/{run_id}/_status" hx-trigger="every'
    assert poll in client.get(f"/runs/{run_id}/_status").text
    assert poll in client.get(f"/runs/{run_id}").text
    assert one(client.get("/runs").text, "#runs-table").get("hx-get") == "/runs/_table"
    client.post(f"/api/runs/{run_id}/cancel")
    assert poll not in client.get(f"/runs/{run_id}/_status").text
    # the table stops polling (the filter form still fetches it on demand)
    assert not one(client.get("/runs").text, "#runs-table").has_attr("hx-get")
