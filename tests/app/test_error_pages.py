"""Browser requests get HTML error pages in the site's layout; /api and non-HTML clients keep
FastAPI's JSON ``{"detail": ...}``."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.app.conftest import html, one

BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def test_unknown_run_is_an_html_page_for_a_browser(client: TestClient) -> None:
    reply = client.get("/runs/987654", headers=BROWSER)
    assert reply.status_code == 404
    assert reply.headers["content-type"].startswith("text/html")
    assert one(reply.text, "#error-page")["data-status"] == "404"
    assert "run 987654 not found" in one(reply.text, "#error-detail").text
    page = html(reply.text)
    assert page.select_one("header.topbar") is not None  # the site's layout, not a bare page
    assert page.select_one("a.skip-link[href='#main']") is not None


def test_unknown_path_is_html_too(client: TestClient) -> None:
    reply = client.get("/no/such/page", headers=BROWSER)
    assert reply.status_code == 404 and "text/html" in reply.headers["content-type"]
    assert "Page not found" in one(reply.text, "h1").text


def test_api_and_non_browser_clients_keep_json(client: TestClient) -> None:
    api = client.get("/api/runs/987654", headers=BROWSER)
    assert api.status_code == 404 and api.json() == {"detail": "run 987654 not found"}
    plain = client.get("/runs/987654")  # curl, fetch: Accept */*
    assert plain.status_code == 404 and plain.json() == {"detail": "run 987654 not found"}
    htmx = client.get("/runs/987654/_status", headers={**BROWSER, "HX-Request": "true"})
    assert htmx.status_code == 404 and htmx.json()["detail"] == "run 987654 not found"


def _boom() -> None:
    raise RuntimeError("secret internals: /etc/grpodeck password=hunter2")


def test_server_error_is_an_html_page_without_internals(app_db: str) -> None:
    from app.main import create_app

    app: FastAPI = create_app()
    app.add_api_route("/runs/boom/page", _boom)
    app.add_api_route("/api/boom", _boom)
    client = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    page = client.get("/runs/boom/page", headers=BROWSER)
    assert page.status_code == 500 and "text/html" in page.headers["content-type"]
    assert one(page.text, "#error-page")["data-status"] == "500"
    assert "hunter2" not in page.text and "RuntimeError" not in page.text
    api = client.get("/api/boom", headers=BROWSER)
    assert api.status_code == 500 and api.json() == {"detail": "internal server error"}
    assert "hunter2" not in api.text


def test_bad_address_part_is_a_page_with_the_reason(client: TestClient) -> None:
    page = client.get("/runs/abc", headers=BROWSER)
    assert page.status_code == 422 and "text/html" in page.headers["content-type"]
    assert "run_id" in one(page.text, "#error-detail").text
    api = client.get("/api/runs/abc", headers=BROWSER)
    assert api.status_code == 422 and api.json()["detail"][0]["loc"] == ["path", "run_id"]
