"""The Artifacts tab's Delete button (issue 56, 7d), in process on SQLite and PostgreSQL: shown to
the run's owner and admins only; its route deletes the row and the stored file for them and
refuses everyone else (403, nothing deleted) and a cross-site post; the page re-renders the
table without the row. The browser flow: tests/e2e/test_run_page_details.py."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.core.db import get_sessionmaker
from app.runs import service
from grpodeck.contract.spec import RunSpec
from tests.app.conftest import SPEC, claim, html
from tests.app.test_artifacts import UP, put, stored_files
from tests.app.test_auth import login, make_user


def owned_run_with_artifacts(client: TestClient, *names: str) -> tuple[int, list[int]]:
    """A run of owner@example.com (other@ and admin@ exist too) holding one file per name."""
    owner_id = make_user("owner@example.com")
    make_user("other@example.com")
    make_user("admin@example.com", admin=True)
    with get_sessionmaker()() as db:
        run, ticket = service.create_run(db, spec=RunSpec.model_validate(SPEC),
                                         created_by=owner_id)
        db.commit()
        run_id = run.id
    headers = claim(client, run_id, ticket)
    ids = [put(client, run_id, headers, name.encode(), name).json()["id"] for name in names]
    return run_id, ids


def listed(client: TestClient, run_id: int) -> list[str]:
    return [a["name"] for a in client.get(UP.format(run_id)).json()]


def test_the_delete_button_is_shown_to_the_owner_and_admins_only(client: TestClient) -> None:
    run_id, ids = owned_run_with_artifacts(client, "a.bin")
    for who, shown in (("other", False), ("owner", True), ("admin", True)):
        login(client, f"{who}@example.com")
        page = html(client.get(f"/runs/{run_id}/artifacts").text)
        buttons = page.select(f"#delete-artifact-{ids[0]}")
        assert bool(buttons) is shown, who
    form = page.select_one(f"form[data-artifact='{ids[0]}']")
    assert form is not None and form["hx-post"] == f"/runs/{run_id}/artifacts/{ids[0]}/delete"
    assert "a.bin" in form["hx-confirm"] and form["hx-target"] == "#artifacts-panel"


def test_another_user_gets_403_and_nothing_is_deleted(client: TestClient,
                                                      tmp_path: Path) -> None:
    run_id, ids = owned_run_with_artifacts(client, "a.bin", "b.bin")
    login(client, "other@example.com")
    refused = client.post(f"/runs/{run_id}/artifacts/{ids[0]}/delete",
                          headers={"HX-Request": "true"})
    assert refused.status_code == 403 and "only its owner or an admin" in refused.text
    assert listed(client, run_id) == ["a.bin", "b.bin"] and len(stored_files(tmp_path)) == 2


def test_the_owner_and_an_admin_delete_and_the_table_comes_back_without_the_row(
        client: TestClient, tmp_path: Path) -> None:
    run_id, ids = owned_run_with_artifacts(client, "a.bin", "b.bin", "c.bin")
    for who, artifact in (("owner", ids[0]), ("admin", ids[1])):
        login(client, f"{who}@example.com")
        reply = client.post(f"/runs/{run_id}/artifacts/{artifact}/delete",
                            headers={"HX-Request": "true", "Sec-Fetch-Site": "same-origin"})
        assert reply.status_code == 200, reply.text
        panel = html(reply.text).select_one("#artifacts-panel")
        assert panel is not None and not panel.select(f"tr[data-artifact='{artifact}']")
        assert "deleted" in reply.headers.get("HX-Trigger", "")  # the toast says so
    assert listed(client, run_id) == ["c.bin"] and len(stored_files(tmp_path)) == 1
    without_js = client.post(f"/runs/{run_id}/artifacts/{ids[2]}/delete", follow_redirects=False)
    assert without_js.status_code == 303  # a plain form post goes back to the tab
    assert without_js.headers["location"] == f"/runs/{run_id}/artifacts"
    assert listed(client, run_id) == [] and stored_files(tmp_path) == []
    gone = client.post(f"/runs/{run_id}/artifacts/{ids[2]}/delete")
    assert gone.status_code == 404


def test_a_cross_site_post_deletes_nothing(client: TestClient, tmp_path: Path) -> None:
    run_id, ids = owned_run_with_artifacts(client, "a.bin")
    login(client, "owner@example.com")
    forged = client.post(f"/runs/{run_id}/artifacts/{ids[0]}/delete",
                         headers={"Sec-Fetch-Site": "cross-site"})
    assert forged.status_code == 403
    assert listed(client, run_id) == ["a.bin"] and len(stored_files(tmp_path)) == 1
