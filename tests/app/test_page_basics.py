"""Small things every page gets right (issue 34): a run of unknown length shows its step with no
"/ 0", the favicon is served and linked rather than a 404 on every page, and a waiting dry run's
timer arrives with its time rather than "0s" at each refresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.dryruns.models import DryRun
from tests.conftest import tiny_spec

OUTSIDE = {"source": "external", "name": "no-length", "spec": {"num_generations": 4}}


def test_a_run_without_max_steps_shows_its_step_without_a_bogus_denominator(
        client: TestClient) -> None:
    out = client.post("/api/runs", json=OUTSIDE).json()  # development mode: no key needed
    rows = [{"step": s, "metrics": {"reward": 0.1}} for s in range(1, 31)]
    sent = client.post(f"/api/runs/{out['id']}/metrics", json={"rows": rows},
                       headers={"Authorization": f"Bearer {out['token']}"})
    assert sent.status_code == 200, sent.text
    run_page = BeautifulSoup(client.get(f"/runs/{out['id']}").text, "html.parser")
    assert run_page.select_one("#run-step").text.strip() == "30"
    listing = BeautifulSoup(client.get("/runs").text, "html.parser")
    cell = listing.select_one(f"#run-row-{out['id']} td[data-label=Progress]")
    assert cell is not None and cell.text.split() == ["30"], cell


def test_the_favicon_is_served_and_every_page_links_it(client: TestClient) -> None:
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg")
    for path in ("/runs", "/runs/new", "/alerts", "/login", "/docs"):
        page = BeautifulSoup(client.get(path).text, "html.parser")
        link = page.select_one("link[rel=icon]")
        assert link is not None, path
        linked = client.get(link["href"])
        assert linked.status_code == 200 and linked.content == icon.content, path


def test_a_waiting_dry_runs_refresh_brings_its_elapsed_time_not_zero(client: TestClient) -> None:
    with get_sessionmaker()() as db:
        dry = DryRun(spec=tiny_spec(name="dry"), status="queued",
                     created_at=datetime.now(UTC) - timedelta(seconds=95))
        db.add(dry)
        db.commit()
        dry_id = dry.id
    for path in (f"/dry-runs/{dry_id}/_result", f"/dry-runs/{dry_id}"):  # refresh and page
        timer = BeautifulSoup(client.get(path).text, "html.parser").select_one("#dry-run-elapsed")
        assert timer is not None and timer.text.startswith("1m 3"), (path, timer)
