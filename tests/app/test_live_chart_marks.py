"""A live run page's chart poll (app/run_page/live_charts.py): new points answer 204, a
finding opened or resolved answers only the marks (no point re-read), a new metric or a mark on
a wall-clock chart answers the whole panel; the marks sent alone equal the ones the whole panel
draws."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.charts.figures import MARK_COLORS
from app.core.db import get_sessionmaker
from app.diagnostics import Diagnosis
from app.diagnostics.model import Finding
from app.health import service as health
from app.health.service import findings_for
from app.runs.models import Run
from tests.app.conftest import one, running_run


def report(client: TestClient, run_id: int, headers: dict[str, str], steps: range,
           **extra: float) -> None:
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "kl": 0.01, "loss": 0.5, **extra}}
            for s in steps]
    reply = client.post(f"/api/runs/{run_id}/metrics", headers=headers, json={"rows": rows})
    assert reply.status_code == 200, reply.text


def diagnose(run_id: int, findings: list[Finding],
             sessions: Callable[[], Session] | None = None) -> None:
    """Store a diagnosis until what it says is shown (a severity must hold a few evaluations);
    ``sessions``: another stack's database (the app's by default)."""
    wanted = {(f.category, f.metric, f.severity) for f in findings}
    for _ in range(10):
        with (sessions or get_sessionmaker())() as db:
            run = db.get(Run, run_id)
            assert run is not None
            run.current_step = (run.current_step or 0) + 5  # each evaluation brings new steps
            health.store(db, run, Diagnosis.from_findings(findings), datetime.now(UTC),
                         step=run.current_step)
            db.commit()
            shown = {(f.category, f.metric, f.severity) for f in findings_for(db, run_id)
                     if f.active}
        if shown == wanted:
            return
    raise AssertionError(f"shown {shown}, wanted {wanted}")


def kl_blowup(severity: str = "critical", metric: str = "kl") -> Finding:
    return Finding(category="kl_blowup", severity=severity, first_step=3, last_step=9,
                   summary="KL grows", metric=metric)


def poll_of(text: str) -> str:
    return str(one(text, "#charts-panel")["data-poll"])


def test_a_finding_opened_or_resolved_sends_only_its_marks(client: TestClient) -> None:
    run_id, headers = running_run(client)
    report(client, run_id, headers, range(1, 11))
    poll = poll_of(client.get(f"/runs/{run_id}").text)
    report(client, run_id, headers, range(11, 13))
    assert client.get(poll).status_code == 204  # points only

    diagnose(run_id, [kl_blowup()])
    answer = client.get(poll)
    assert answer.status_code == 200
    section = one(answer.text, "#charts-panel")
    assert section["data-marks-only"] == "1" and not section.select(".chart-box")
    assert len(answer.content) < 2_000  # not the 10k+ of a panel's figures
    marks = json.loads(str(section["data-marks"]))
    assert list(marks) == ["kl"]
    assert [(s["x0"], s["x1"]) for s in marks["kl"]["shapes"]] == [(3, 9)]
    assert [a["text"] for a in marks["kl"]["annotations"]] == ["kl_blowup"]
    # the same marks the whole panel draws
    whole = client.get(f"/runs/{run_id}/_charts").text
    figure = json.loads(str(one(whole, "#chart-kl")["data-figure"]))
    assert figure["layout"]["shapes"] == marks["kl"]["shapes"]
    assert figure["layout"]["annotations"] == marks["kl"]["annotations"]

    poll = str(section["data-poll"])
    assert poll == poll_of(whole)  # where a freshly drawn page polls from
    assert client.get(poll).status_code == 204
    report(client, run_id, headers, range(13, 15))
    assert client.get(poll).status_code == 204  # the open finding grows: the page stretches it

    diagnose(run_id, [])  # resolved: its chart has no mark left
    answer = client.get(poll)
    assert answer.status_code == 200
    section = one(answer.text, "#charts-panel")
    assert section["data-marks-only"] == "1" and json.loads(str(section["data-marks"])) == {}
    assert client.get(str(section["data-poll"])).status_code == 204


def test_a_severity_change_resends_the_marks(client: TestClient) -> None:
    run_id, headers = running_run(client)
    report(client, run_id, headers, range(1, 11))
    diagnose(run_id, [kl_blowup("warning")])
    poll = poll_of(client.get(f"/runs/{run_id}").text)
    diagnose(run_id, [kl_blowup("critical")])
    section = one(client.get(poll).text, "#charts-panel")
    assert section["data-marks-only"] == "1"
    shape = json.loads(str(section["data-marks"]))["kl"]["shapes"][0]
    assert shape["fillcolor"] == MARK_COLORS["critical"] != MARK_COLORS["warning"]


def test_an_info_finding_leaves_the_charts_alone(client: TestClient) -> None:
    run_id, headers = running_run(client)
    report(client, run_id, headers, range(1, 11))
    poll = poll_of(client.get(f"/runs/{run_id}").text)
    diagnose(run_id, [kl_blowup("info")])  # shown in the findings panel, shades no chart
    assert client.get(poll).status_code == 204


def test_a_new_metric_with_a_new_finding_rebuilds_the_panel(client: TestClient) -> None:
    run_id, headers = running_run(client)
    report(client, run_id, headers, range(1, 11))
    poll = poll_of(client.get(f"/runs/{run_id}").text)
    report(client, run_id, headers, range(11, 13), entropy=0.5)
    diagnose(run_id, [kl_blowup()])
    answer = client.get(poll)
    assert answer.status_code == 200 and not one(answer.text, "#charts-panel").get(
        "data-marks-only")
    assert one(answer.text, "#chart-entropy") and one(answer.text, "#chart-kl")


def test_a_mark_on_a_wall_clock_chart_rebuilds_the_panel(client: TestClient) -> None:
    """System charts draw steps at their sample times: a mark there needs the server's figure."""
    run_id, headers = running_run(client)
    report(client, run_id, headers, range(1, 11), **{"system/cpu_percent": 50.0})
    poll = poll_of(client.get(f"/runs/{run_id}").text)
    diagnose(run_id, [kl_blowup("warning", metric="system/cpu_percent")])
    answer = client.get(poll)
    assert answer.status_code == 200
    section = one(answer.text, "#charts-panel")
    assert not section.get("data-marks-only") and one(answer.text, "#chart-system_cpu")
