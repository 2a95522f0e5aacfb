"""Controlling a run from outside: cancelling a queued run (API and page), a broker that is down
at launch, and a worker reporting to a run that has already ended."""

from __future__ import annotations

import socket

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from tests.app.conftest import SPEC, claim, html, one, queued_run

HTMX = {"HX-Request": "true", "HX-Target": "status-panel"}


def closed_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_panel(client: TestClient, run_id: int):  # type: ignore[no-untyped-def]
    return one(client.get(f"/runs/{run_id}").text, "#status-panel")


def status_in_list(client: TestClient, run_id: int) -> str:
    row = one(client.get("/runs").text, f'#runs-table tr:has(a[href="/runs/{run_id}"])')
    return row.select_one(".status").get_text(strip=True)


def assert_worker_is_turned_away(client: TestClient, run_id: int, ticket: str) -> None:
    """A worker that picks the task up late can neither claim the run nor report to it: its
    ticket buys no token (409) and is no token itself (401)."""
    headers = {"Authorization": f"Bearer {ticket}"}
    assert client.post(f"/api/runs/{run_id}/claim", json={"pid": 9},
                       headers=headers).status_code == 409
    rows = {"rows": [{"step": 1, "metrics": {"reward": 1.0}}]}
    assert client.post(f"/api/runs/{run_id}/metrics", json=rows, headers=headers).status_code == 401
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {}


@pytest.mark.one_backend
def test_queued_run_shows_as_queued_with_a_cancel_button(client: TestClient) -> None:
    run_id, _ = queued_run()
    panel = status_panel(client, run_id)
    assert panel.select_one("#run-status").get_text(strip=True) == "queued"
    assert panel["hx-get"] == f"/runs/{run_id}/_status"  # a queued run's page keeps polling
    assert panel.select_one("button[hx-post]")["hx-post"] == f"/runs/{run_id}/cancel"
    assert status_in_list(client, run_id) == "queued"


def test_cancel_of_a_queued_run_through_the_api(client: TestClient) -> None:
    run_id, ticket = queued_run()
    reply = client.post(f"/api/runs/{run_id}/cancel")
    assert reply.status_code == 200, reply.text
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "cancelled" and run["started_at"] is None and run["finished_at"]
    panel = status_panel(client, run_id)
    assert panel.select_one("#run-status").get_text(strip=True) == "cancelled"
    assert "cancelled by user" in panel.get_text()
    assert not panel.select('button[hx-post$="/cancel"]') and not panel.has_attr("hx-get")
    assert status_in_list(client, run_id) == "cancelled"
    assert_worker_is_turned_away(client, run_id, ticket)
    again = client.post(f"/api/runs/{run_id}/cancel")
    assert again.status_code == 409 and "only queued or running" in again.json()["detail"]


def test_cancel_of_a_queued_run_through_the_page(client: TestClient) -> None:
    run_id, ticket = queued_run()
    button = status_panel(client, run_id).select_one("button[hx-post]")
    fragment = client.post(button["hx-post"], headers=HTMX)  # what htmx sends on the click
    assert fragment.status_code == 200
    swapped = html(fragment.text)
    assert [s["id"] for s in swapped.select("section")] == ["status-panel"]  # swaps the panel
    assert swapped.select_one("#run-status").get_text(strip=True) == "cancelled"
    assert swapped.select("button[hx-post$=\"/cancel\"]") == [] and swapped.select(".alert") == []
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "cancelled"
    assert_worker_is_turned_away(client, run_id, ticket)
    late = html(client.post(button["hx-post"], headers=HTMX).text)  # a second, stale click
    assert "only queued or running runs can stop" in late.select_one(".alert").get_text()
    assert late.select_one("#run-status").get_text(strip=True) == "cancelled"


@pytest.fixture
def broker_down(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"redis://127.0.0.1:{closed_port()}/0"
    monkeypatch.setenv("GRPODECK_BROKER_URL", url)
    config_module.get_settings.cache_clear()
    return url


def test_broker_failure_at_launch_fails_the_run_visibly(client: TestClient, broker_down) -> None:  # type: ignore[no-untyped-def]
    reply = client.post("/api/runs", json=SPEC)
    assert reply.status_code == 201, reply.text
    assert reply.json()["status"] == "failed"  # stored, not lost, and says what happened
    run = client.get(f"/api/runs/{reply.json()['id']}").json()
    assert run["status"] == "failed" and run["error"].startswith("could not queue the run:")
    assert run["name"] == SPEC["name"] and run["finished_at"]
    error = one(client.get(f"/runs/{run['id']}").text, "#run-error").get_text()
    assert "could not queue the run" in error
    assert status_in_list(client, run["id"]) == "failed"


@pytest.mark.one_backend
def test_broker_failure_through_the_form_lands_on_the_failed_run(client: TestClient,  # type: ignore[no-untyped-def]
                                                                 broker_down) -> None:
    form = {"name": "no-broker", "model": SPEC["model"], "dataset": SPEC["dataset"],
            "reward_0_name": "length_target", "reward_0_weight": "1",
            "reward_0_params": "target=20", "num_generations": "4", "max_steps": "3"}
    page = client.post("/runs/new", data=form, follow_redirects=False)
    assert page.status_code == 303
    landed = client.get(page.headers["location"]).text
    assert one(landed, "#run-status").get_text(strip=True) == "failed"
    assert "could not queue the run" in one(landed, "#run-error").get_text()


def test_a_finished_run_refuses_metrics_and_claims(client: TestClient) -> None:
    run_id, ticket = queued_run()
    headers = claim(client, run_id, ticket)
    first = {"rows": [{"step": s, "metrics": {"reward": s / 10}} for s in (1, 2)]}
    assert client.post(f"/api/runs/{run_id}/metrics", json=first, headers=headers).status_code == 200
    done = client.post(f"/api/runs/{run_id}/finished", json={"returncode": 0}, headers=headers)
    assert done.json()["status"] == "succeeded"
    late = {"rows": [{"step": 3, "metrics": {"reward": 9.0}}]}
    reply = client.post(f"/api/runs/{run_id}/metrics", json=late, headers=headers)
    assert reply.status_code == 401  # the run's token expired with the run (issue 7, bug 7)
    assert client.get(f"/api/runs/{run_id}/metrics").json() == {
        "reward": {"steps": [1, 2], "values": [0.1, 0.2]}}
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "succeeded" and run["step"] == 2
    again = client.post(f"/api/runs/{run_id}/claim", json={"pid": 2},
                        headers={"Authorization": f"Bearer {ticket}"})
    assert again.status_code == 409  # a second delivery of the task cannot revive it
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "succeeded"
