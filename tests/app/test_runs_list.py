"""The runs list at scale: filters, sort and pages on the server, tags, notes, archive and
delete from the list, and a page costing the same few queries whatever it shows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.core.config import get_settings
from app.core.db import get_engine, get_sessionmaker
from app.runs.models import Run
from tests.app.conftest import html, one
from tests.conftest import tiny_spec

HTMX = {"HX-Request": "true"}


def add_runs(count: int, **fields: object) -> list[int]:
    """``count`` stored runs in one transaction (no broker): the list only reads rows."""
    with get_sessionmaker()() as db:
        values = {"status": "succeeded", "max_steps": 5, **fields}
        runs = [Run(name=f"run-{i:04d}", spec=tiny_spec(name=f"run-{i:04d}"), **values)
                for i in range(count)]
        db.add_all(runs)
        db.commit()
        return [r.id for r in runs]


def listed(client: TestClient, query: str = "") -> list[int]:
    reply = client.get(f"/runs{query}")
    assert reply.status_code == 200, reply.text
    return [int(tr["id"].removeprefix("run-row-")) for tr in html(reply.text).select("tr[id]")]


def test_pages_sort_and_filters(client: TestClient) -> None:
    ids = add_runs(120)
    failed = add_runs(3, status="failed")
    imported = add_runs(2, source="imported", status="imported")
    newest = sorted(ids + failed + imported, reverse=True)
    assert listed(client) == newest[:50]
    assert listed(client, "?page=3") == newest[100:125]
    assert "125 runs" in one(client.get("/runs").text, "#runs-count").get_text()
    assert listed(client, "?sort=oldest&per_page=10") == sorted(newest)[:10]
    assert listed(client, "?status=failed") == sorted(failed, reverse=True)
    assert listed(client, "?source=imported") == sorted(imported, reverse=True)
    assert listed(client, "?q=run-0007") == [ids[7]]
    assert listed(client, f"?q=%23{ids[3]}") == [ids[3]]
    assert listed(client, "?q=100%25") == []  # % is a literal, not a LIKE wildcard
    assert listed(client, "?model=builtin:tiny-random&per_page=200") == newest
    assert listed(client, "?model=builtin:other") == []
    assert listed(client, "?dataset=builtin:short-prompts&status=failed") == sorted(failed,
                                                                                    reverse=True)
    assert listed(client, "?dataset=builtin:arithmetic") == []
    form = one(client.get("/runs?dataset=builtin:arithmetic&sort=name").text, "#run-filters")
    assert form.select_one('input[name="dataset"]')["value"] == "builtin:arithmetic"
    assert form.select_one('select[name="sort"] option[selected]')["value"] == "name"
    assert listed(client, "?reward=length_target&status=failed") == sorted(failed, reverse=True)
    by_name = listed(client, "?sort=name&per_page=3")
    assert by_name == [imported[0], failed[0], ids[0]]  # "run-0000" three times, newest first


def test_bad_list_queries_are_refused_with_the_reason(client: TestClient) -> None:
    for query, words in (("?sort=size", "unknown sort"), ("?page=0", "page must be between"),
                         ("?per_page=x", "per_page must be a whole number"),
                         ("?archived=maybe", "archived must be one of")):
        reply = client.get(f"/runs{query}")
        assert reply.status_code == 400 and words in reply.text, query


def test_tags_notes_and_archive_from_the_list(client: TestClient) -> None:
    first, second = add_runs(2)
    reply = client.post(f"/runs/{first}/annotate", headers=HTMX,
                        data={"tags": "Baseline, lr-sweep baseline", "note": "<b>try lr 3e-6</b>",
                              "list": "?sort=oldest"})
    assert reply.status_code == 200
    row = one(reply.text, f"#run-row-{first}")
    assert [a.get_text() for a in row.select(".tag")] == ["baseline", "lr-sweep"]
    assert row.select_one(".note").get_text() == "<b>try lr 3e-6</b>"  # escaped, not markup
    assert listed(client, "?tag=lr-sweep") == [first]
    assert listed(client, "?q=LR 3E") == [first]  # text search reads notes, any case
    bad = client.post(f"/runs/{first}/annotate", headers=HTMX,
                      data={"tags": "ok, no spaces!", "note": "", "list": ""})
    assert bad.status_code == 422 and "spaces!" in one(bad.text, "#list-flash").get_text()
    assert listed(client, "?tag=baseline") == [first]  # the refused edit changed nothing
    archived = client.post(f"/runs/{second}/archive", data={"archived": "1", "list": "?q=run"},
                           follow_redirects=False)
    assert archived.status_code == 303 and archived.headers["location"] == "/runs?q=run"
    assert listed(client) == [first]
    assert listed(client, "?archived=archived") == [second]
    client.post(f"/runs/{second}/archive", data={"archived": "0", "list": ""})
    assert listed(client) == [second, first]


def test_delete_from_the_list_removes_rows_and_files(client: TestClient, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_RUNS_DIR", str(tmp_path / "runs"))
    get_settings.cache_clear()
    keep, doomed = add_runs(2)
    files = get_settings().runs_dir / str(doomed)
    files.mkdir(parents=True)
    (files / "stdout.log").write_text("log")
    client.post(f"/runs/{doomed}/annotate", data={"tags": "x", "note": "", "list": ""})
    reply = client.post(f"/runs/{doomed}/delete", headers=HTMX, data={"list": "?tag=x"})
    assert reply.status_code == 200
    assert f"run {doomed} deleted" in one(reply.text, "#list-flash").get_text()
    assert client.get(f"/api/runs/{doomed}").status_code == 404
    assert not files.exists()
    assert listed(client) == [keep] and listed(client, "?tag=x") == []


def test_a_live_run_cannot_be_deleted_from_the_list(client: TestClient) -> None:
    (run_id,) = add_runs(1, status="running")
    page = client.get("/runs").text
    assert not html(page).select(f'#run-row-{run_id} form[action$="/delete"]')
    reply = client.post(f"/runs/{run_id}/delete", headers=HTMX, data={"list": ""})
    assert reply.status_code == 409 and "cancel it before" in reply.text
    assert listed(client) == [run_id]


@contextmanager
def counted() -> Iterator[list[str]]:
    statements: list[str] = []

    def note(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(get_engine(), "before_cursor_execute", note)
    try:
        yield statements
    finally:
        event.remove(get_engine(), "before_cursor_execute", note)


@pytest.mark.one_backend
def test_a_page_costs_the_same_queries_whatever_it_shows(client: TestClient) -> None:
    ids = add_runs(60)
    for run_id in ids[:40]:
        client.post(f"/runs/{run_id}/annotate", data={"tags": f"t{run_id % 3}", "note": "n",
                                                     "list": ""})
    with counted() as small:
        assert len(listed(client, "?per_page=2")) == 2
    with counted() as large:
        assert len(listed(client, "?per_page=60")) == 60
    assert len(large) == len(small) <= 10, large


def test_the_json_list_takes_the_same_filters(client: TestClient) -> None:
    ids = add_runs(5)
    client.post(f"/runs/{ids[1]}/annotate", data={"tags": "keep", "note": "", "list": ""})
    reply = client.get("/api/runs", params={"tag": "keep"})
    assert [r["id"] for r in reply.json()] == [ids[1]] and reply.headers["x-total-count"] == "1"
    paged = client.get("/api/runs", params={"per_page": 2, "page": 2, "sort": "oldest"})
    assert [r["id"] for r in paged.json()] == ids[2:4] and paged.headers["x-total-count"] == "5"
    bad = client.get("/api/runs", params={"sort": "size"})
    assert bad.status_code == 400 and "unknown sort" in bad.json()["detail"]


def test_only_the_owner_or_an_admin_changes_a_run_from_the_list(client: TestClient) -> None:
    from tests.app.test_auth import api_key, login, make_user

    make_user("owner@example.com")
    make_user("other@example.com")
    owner = api_key("owner@example.com")
    run_id = client.post("/api/runs", json=tiny_spec(name="owned"), headers=owner).json()["id"]
    client.post(f"/api/runs/{run_id}/cancel", headers=owner)
    login(client, "other@example.com")
    for action, data in (("annotate", {"tags": "mine", "note": "x"}), ("archive", {}),
                         ("delete", {})):
        reply = client.post(f"/runs/{run_id}/{action}", headers=HTMX, data={**data, "list": ""})
        assert reply.status_code == 403, action
        assert "belongs to another user" in one(reply.text, "#list-flash").get_text(), action
    assert listed(client) == [run_id] and listed(client, "?tag=mine") == []
    login(client, "owner@example.com")
    assert client.post(f"/runs/{run_id}/archive", headers=HTMX,
                       data={"list": ""}).status_code == 200
    assert listed(client, "?archived=archived") == [run_id]


def test_the_list_filters_by_sweep_and_offers_the_sweeps_in_use(client: TestClient) -> None:
    add_runs(3)
    first = add_runs(2, sweep_id="a1b2")
    add_runs(2, sweep_id="c3d4")
    assert sorted(listed(client, "?sweep=a1b2")) == first
    menu = html(client.get("/runs").text).select_one("select[name=sweep]")
    assert [o["value"] for o in menu.select("option")] == ["", "a1b2", "c3d4"]
    assert [r["id"] for r in client.get("/api/runs", params={"sweep": "c3d4"}).json()] != []


@pytest.mark.one_backend
def test_tests_never_touch_the_developers_own_run_folders(client: TestClient) -> None:
    """Deleting a test's run 1 once removed the developer's real var/runs/1 (same id, same
    default folder): in-process tests keep their files in their own temporary folder."""
    from app.core.config import VAR

    settings = get_settings()
    for folder in (settings.runs_dir, settings.datasets_dir):
        assert not folder.resolve().is_relative_to(VAR.resolve()), folder


@pytest.mark.one_backend  # which page answers: no storage difference
def test_every_address_the_list_shows_is_a_whole_page(client: TestClient) -> None:
    """Issue 56: the filter form pushed /runs/_table?...; reloaded, bookmarked or shared, that
    was the bare table. The form now asks for /runs (htmx picks the table out) and pushes the
    short page address the server names; the fragment's address opened as a page (or restored
    from history) goes to the whole page with the same filters."""
    add_runs(3)
    query = "?q=run-&status=&tag=&archived=active&sort=id&dir=desc"
    swap = client.get(f"/runs{query}", headers=HTMX)
    assert swap.status_code == 200 and swap.headers["hx-push-url"] == "/runs?q=run-"
    form = one(client.get("/runs").text, "#run-filters")
    assert (form["hx-get"], form["hx-select"], form["hx-push-url"]) == ("/runs", "#runs-table",
                                                                        "true")
    assert "hx-push-url" not in client.get("/runs?q=run-").headers  # a plain load
    for headers in ({}, {**HTMX, "HX-History-Restore-Request": "true"}):
        reply = client.get(f"/runs/_table{query}", headers=headers, follow_redirects=False)
        assert reply.status_code == 303 and reply.headers["location"] == f"/runs{query}"
    assert client.get(f"/runs/_table{query}", headers=HTMX).text.lstrip().startswith('<div id="runs-table"')
