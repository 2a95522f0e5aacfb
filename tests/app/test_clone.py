"""Clone ("New run from this one"): the form comes back filled with every field of the run's
spec, launching it unchanged yields the same spec, and the new run remembers its parent and
shows what changed."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs import service
from tests.app.conftest import html, one, queued_run
from tests.conftest import tiny_spec

# Every field away from its default, four rewards (the form shows three rows by default).
FULL: dict[str, Any] = tiny_spec(
    name="parent-run", dataset_config="main", train_split="train[:50]", eval_split="test",
    eval_steps=3, num_generations=3, per_device_train_batch_size=6, max_steps=7,
    learning_rate=3e-6, beta=0.0, epsilon=0.3, max_prompt_length=64, max_completion_length=24,
    temperature=0.7, scale_rewards="batch", logging_steps=2, seed=7, rollout_every=2,
    rollout_groups=1, stop_on_critical=True,
    alerts={"urls": ["json://127.0.0.1:9/hook"], "min_severity": "critical",
            "ignore": ["stalled", "kl_spike"]},
    rewards=[{"name": "length_target", "weight": 0.5, "params": {"target": 30}},
             {"name": "format_tag", "weight": 2.0, "params": {"tag": "think"}},
             {"name": "exact_answer", "weight": 1.0, "params": {}},
             {"name": "constant", "weight": -1.0, "params": {"value": 0.25}}])


@pytest.fixture(autouse=True)
def loopback_alerts_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """FULL's alert URL is on loopback, which the outbound URL policy refuses unless allowed."""
    from app.core import config

    monkeypatch.setenv("GRPODECK_ALERT_ALLOW_HOSTS", "127.0.0.1")
    config.get_settings.cache_clear()


def submitted(form: BeautifulSoup) -> dict[str, str]:
    """What a browser sends for this form: inputs with their value, checked boxes, the
    selected option (or the first) of each select."""
    data: dict[str, str] = {}
    for field in form.select("input[name]"):
        if field.get("type") == "checkbox":
            if field.has_attr("checked"):
                data[field["name"]] = "on"
            continue
        data[field["name"]] = field.get("value", "")
    for select in form.select("select[name]"):
        chosen = select.select_one("option[selected]") or select.select_one("option")
        data[select["name"]] = chosen.get("value", chosen.get_text())
    return data


def test_clone_keeps_every_field_and_shows_what_changed(client: TestClient) -> None:
    parent_id, _ = queued_run(FULL)
    parent = client.get(f"/api/runs/{parent_id}").json()["spec"]
    page = client.get(f"/runs/new?from={parent_id}")
    assert page.status_code == 200
    assert f"/runs/{parent_id}" in one(page.text, "#cloned-from").a["href"]
    data = submitted(one(page.text, "#run-form"))
    assert data["parent_id"] == str(parent_id)
    same = client.post("/runs/new", data=data, follow_redirects=False)
    assert same.status_code == 303, same.text
    same_id = int(same.headers["location"].rsplit("/", 1)[1])
    assert client.get(f"/api/runs/{same_id}").json()["spec"] == parent
    assert one(client.get(f"/runs/{same_id}").text, "#spec-changes").get_text(
        strip=True) == "Same spec as its parent."

    changed = client.post("/runs/new", follow_redirects=False,
                          data={**data, "name": "child", "learning_rate": "1e-5",
                                "reward_1_params": "tag=answer"})
    child_id = int(changed.headers["location"].rsplit("/", 1)[1])
    run_page = client.get(f"/runs/{child_id}").text
    assert one(run_page, "#parent-link")["href"] == f"/runs/{parent_id}"
    rows = {tr.th.get_text(): [td.get_text() for td in tr.select("td")]
            for tr in html(run_page).select("#spec-changes tbody tr")}
    assert rows == {"name": ["parent-run", "child"], "learning_rate": ["3e-06", "1e-05"],
                    "rewards.1.params.tag": ["think", "answer"]}
    listed = one(client.get("/runs").text, f"#run-row-{child_id}")
    assert f"#{parent_id}" in listed.get_text()


def test_clone_of_a_missing_or_imported_run_is_refused(client: TestClient) -> None:
    assert client.get("/runs/new?from=999").status_code == 404
    assert client.get("/runs/new?from=abc").status_code == 400
    assert client.post("/runs/new", data={"parent_id": "999"}).status_code == 404
    with get_sessionmaker()() as db:
        imported = service.create_imported_run(db, name="log", spec={"source_file": "x"},
                                               max_step=3)
        db.commit()
    reply = client.get(f"/runs/new?from={imported.id}")
    assert reply.status_code == 409 and "imported" in reply.json()["detail"]
    assert "clone-link" not in client.get(f"/runs/{imported.id}").text
