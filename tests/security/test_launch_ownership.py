"""Nothing of one user's crosses into another's launch: a clone, a "Try this fix", a smoke
test's full run and a dry run's "Launch" by anyone but the owner start without the owner's alert
destinations (issue 55: a clone by another user posted the masked URLs back and the new run
alerted into the owner's Slack). The owner's own clone keeps them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.dryruns.models import DryRun
from app.runs import service
from app.runs.models import Run
from grpodeck.contract.alerts import masked
from grpodeck.contract.spec import RunSpec
from tests.app.conftest import one
from tests.app.test_auth import login, make_user
from tests.app.test_clone import submitted
from tests.app.test_try_fix import _with_findings, _zero_spread
from tests.conftest import tiny_spec

SECRET = "json://127.0.0.1:9/owner-secret-path"
OWNER_SPEC = tiny_spec(name="owners", num_generations=4, max_steps=30,
                       alerts={"urls": [SECRET], "min_severity": "warning"})


@pytest.fixture(autouse=True)
def loopback_alerts_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The destination is on loopback, which the outbound URL policy refuses unless allowed."""
    from app.core import config

    monkeypatch.setenv("GRPODECK_ALERT_ALLOW_HOSTS", "127.0.0.1")
    config.get_settings.cache_clear()


@pytest.fixture
def owner(client: TestClient) -> int:
    """Two normal accounts; the first owns the runs below, the client is logged in as the
    second (``other``) unless a test logs in again."""
    owner_id = make_user("owner@example.com")
    make_user("other@example.com")
    assert login(client, "other@example.com").status_code == 303
    return owner_id


def _owned_run(owner_id: int, **fields: Any) -> int:
    with get_sessionmaker()() as db:
        run, _ = service.create_run(db, spec=RunSpec.model_validate(OWNER_SPEC),
                                    created_by=owner_id)
        for key, value in fields.items():
            setattr(run, key, value)
        db.commit()
        return run.id


def _urls_of(run_id: int) -> list[str]:
    with get_sessionmaker()() as db:
        return db.get(Run, run_id).spec["alerts"]["urls"]


def _run_count() -> int:
    with get_sessionmaker()() as db:
        return db.query(Run).count()


def _launched(reply: Any) -> int:
    """The new run's id from the redirect (its page, or the compare page of a fix's pair)."""
    assert reply.status_code == 303, reply.text
    location = reply.headers["location"]
    return int(location.rsplit(",", 1)[-1] if "compare" in location
               else location.rsplit("/", 1)[-1])


def test_another_users_clone_starts_without_the_owners_destinations(
        client: TestClient, owner: int) -> None:
    parent_id = _owned_run(owner)
    page = client.get(f"/runs/new?from={parent_id}").text
    field = one(page, "#f-alert_urls")
    assert field.get("value", "") == "" and "owner-secret" not in page
    assert "belong to its owner and are not copied" in one(page, "#h-alert_urls").text
    child = _launched(client.post("/runs/new", data=submitted(one(page, "form.run-form")),
                                  follow_redirects=False))
    assert _urls_of(child) == []


def test_posting_the_owners_masked_text_back_is_refused_not_unmasked(
        client: TestClient, owner: int) -> None:
    """The attack of issue 55: the masked text the clone form used to show, sent back."""
    parent_id = _owned_run(owner)
    data = submitted(one(client.get(f"/runs/new?from={parent_id}").text, "form.run-form"))
    before = _run_count()
    reply = client.post("/runs/new", data={**data, "alert_urls": masked(SECRET)},
                        follow_redirects=False)
    assert reply.status_code == 422
    assert "masked destination" in one(reply.text, "#e-alert_urls").text
    assert _run_count() == before  # nothing stored
    smoke = client.post("/runs/smoke", data={**data, "alert_urls": masked(SECRET)},
                        follow_redirects=False)
    assert smoke.status_code == 422 and _run_count() == before


def test_try_this_fix_of_another_users_run_has_no_destinations(
        client: TestClient, owner: int) -> None:
    parent_id = _owned_run(owner)
    finding_id = _with_findings(parent_id, _zero_spread())
    page = client.get(f"/runs/new?from={parent_id}&fix={finding_id}").text
    assert one(page, "#f-alert_urls").get("value", "") == ""
    form = submitted(one(page, "form.run-form"))
    fixed = _launched(client.post("/runs/smoke", data=form, follow_redirects=False))
    assert _urls_of(fixed) == []


def test_another_users_smoke_test_launches_its_full_run_without_destinations(
        client: TestClient, owner: int) -> None:
    smoke_id = _owned_run(owner, smoke_full_steps=60)
    full = _launched(client.post(f"/runs/{smoke_id}/launch-full", follow_redirects=False))
    assert _urls_of(full) == []


def test_another_users_dry_run_launches_without_destinations(
        client: TestClient, owner: int) -> None:
    with get_sessionmaker()() as db:
        dry = DryRun(spec=OWNER_SPEC, status="done", created_by_id=owner)
        db.add(dry)
        db.commit()
        dry_id = dry.id
    run_id = _launched(client.post(f"/dry-runs/{dry_id}/launch", data={},
                                   follow_redirects=False))
    assert _urls_of(run_id) == []


def test_the_owner_keeps_their_own_destinations(client: TestClient, owner: int) -> None:
    """The other side of each rule: the owner's clone, smoke-to-full and dry-run launch keep
    the full URL (the masked text in the form stands for it)."""
    client.cookies.clear()
    assert login(client, "owner@example.com").status_code == 303
    parent_id = _owned_run(owner)
    page = client.get(f"/runs/new?from={parent_id}").text
    assert one(page, "#f-alert_urls")["value"] == masked(SECRET)
    child = _launched(client.post("/runs/new", data=submitted(one(page, "form.run-form")),
                                  follow_redirects=False))
    assert _urls_of(child) == [SECRET]
    smoke_id = _owned_run(owner, smoke_full_steps=60)
    full = _launched(client.post(f"/runs/{smoke_id}/launch-full", follow_redirects=False))
    assert _urls_of(full) == [SECRET]
