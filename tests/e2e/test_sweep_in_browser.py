"""A sweep's page in a real browser: plotly draws reward, its spread and the zero-spread share,
one line per group size."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session

from app.core.db import make_engine
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.stack import Stack


def sweep_run(live: Stack, sweep_id: str, groups: int) -> int:
    """A run of the sweep, claimed and reporting as a worker would (not queued: no training)."""
    engine = make_engine(live.database_url)
    with Session(engine) as db:
        run, ticket = service.create_run(db, spec=RunSpec(
            name=f"e2e-sweep G={groups}", model="builtin:tiny-random", num_generations=groups))
        run.sweep_id = sweep_id
        db.commit()
        run_id = run.id
    engine.dispose()
    token = httpx.post(f"{live.url}/api/runs/{run_id}/claim", json={},
                       headers={"Authorization": f"Bearer {ticket}"}).json()["token"]
    rows = [{"step": s, "metrics": {"reward": 0.1 * s, "reward_std": 0.1 * groups,
                                    "frac_reward_zero_std": 1 / groups}} for s in (1, 2, 3, 4)]
    assert httpx.post(f"{live.url}/api/runs/{run_id}/metrics", json={"rows": rows},
                      headers={"Authorization": f"Bearer {token}"}).status_code == 200
    return run_id


def test_sweep_page_draws_one_line_per_group_size(page: Page, live: Stack) -> None:
    ids = [sweep_run(live, "e2esweep01", g) for g in (2, 8, 16)]
    page.goto(f"{live.url}/sweeps/e2esweep01")
    expect(page.locator("#sweep-runs tbody tr")).to_have_count(3)
    for i, metric in enumerate(("reward", "reward_std", "frac_reward_zero_std"), start=1):
        chart = page.locator(f"#sweep-{i}")
        expect(chart).to_have_attribute("data-metric", metric)
        expect(chart.locator(".scatterlayer .trace")).to_have_count(3, timeout=20_000)
    expect(page.locator("#sweep-1 .legend")).to_contain_text(f"#{ids[2]} e2e-sweep G=16")
