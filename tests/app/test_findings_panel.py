"""The findings panel lists each category once, its most pressing record first."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.diagnostics import Diagnosis
from app.diagnostics.model import Finding
from app.health import service as health
from app.runs import lifecycle
from app.runs.models import Run
from tests.app.conftest import running_run


def _finding(metric: str, severity: str) -> Finding:
    return Finding(category="kl_blowup", severity=severity, first_step=3, last_step=9,
                   summary=f"KL grows on {metric}", metric=metric)


def test_one_category_on_two_metrics_is_one_entry(client: TestClient) -> None:
    run_id, _ = running_run(client)
    with get_sessionmaker()() as db:
        run = db.get(Run, run_id)
        run.current_step = 20
        lifecycle.fail(run, "ended for the test")  # not live: findings show as diagnosed
        now = datetime.now(UTC)
        health.store(db, run, Diagnosis.from_findings([_finding("kl", "critical"),
                                                       _finding("eval_kl", "warning")]), now)
        health.store(db, run, Diagnosis.from_findings([_finding("kl", "critical")]), now)
        db.commit()
    page = client.get(f"/runs/{run_id}/_findings").text
    assert len(re.findall(r'data-category="kl_blowup"', page)) == 1
    entry = page[page.index('data-category="kl_blowup"'):]
    assert entry.index("KL grows on kl") < entry.index("Also seen") < entry.index("on eval_kl")
    assert "(resolved)" in entry
    assert 'id="run-verdict">critical<' in page
