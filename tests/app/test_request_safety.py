"""Cross-origin protection and security headers, in-process (the browser proof is in
tests/e2e/test_request_safety_in_browser.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.core import config as config_module
from tests.app.conftest import SPEC, running_run

CROSS = [{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
         {"Origin": "http://127.0.0.1:9"}, {"Origin": "null"},
         {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}]


@pytest.mark.parametrize("headers", CROSS)
def test_cross_origin_posts_are_refused_and_store_nothing(client: TestClient,
                                                          headers: dict[str, str]) -> None:
    run_id = client.post("/api/runs", json=SPEC).json()["id"]
    refused = client.post("/api/runs", json=SPEC, headers=headers)
    assert refused.status_code == 403 and "cross-origin" in refused.text
    assert client.post("/runs/new", data={"name": "x"}, headers=headers).status_code == 403
    assert client.post("/runs/import", files={"log": ("l.json", b"[]")},
                       headers=headers).status_code == 403
    assert client.post(f"/runs/{run_id}/cancel", headers=headers).status_code == 403
    assert client.post(f"/api/runs/{run_id}/cancel", headers=headers).status_code == 403
    assert client.post(f"/runs/{run_id}/delete", headers=headers).status_code == 403
    assert client.delete(f"/api/runs/{run_id}", headers=headers).status_code == 403
    runs = client.get("/api/runs", headers=headers).json()  # reads are not refused
    assert [r["id"] for r in runs] == [run_id] and runs[0]["cancel_requested"] is False


def test_same_origin_and_non_browser_posts_pass(client: TestClient) -> None:
    for headers in ({}, {"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"},
                    {"Origin": "http://127.0.0.1"}):
        assert client.post("/api/runs", json=SPEC, headers=headers).status_code == 201, headers


def test_trusted_origins_may_post(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPODECK_TRUSTED_ORIGINS", '["https://deck.example.com"]')
    config_module.get_settings.cache_clear()
    trusted = {"Origin": "https://deck.example.com", "Sec-Fetch-Site": "cross-site"}
    assert client.post("/api/runs", json=SPEC, headers=trusted).status_code == 201


def test_the_workers_report_endpoints_are_exempt(client: TestClient) -> None:
    run_id, headers = running_run(client)
    cross = {**headers, "Sec-Fetch-Site": "cross-site", "Origin": "http://elsewhere.example"}
    body = {"rows": [{"step": 1, "metrics": {"reward": 0.5}}]}
    assert client.post(f"/api/runs/{run_id}/metrics", json=body, headers=cross).status_code == 200


@pytest.mark.parametrize("path", ["/runs", "/api/runs", "/static/app/app.css", "/healthz",
                                  "/nowhere", "/login"])
def test_every_response_carries_the_security_headers(client: TestClient, path: str) -> None:
    response = client.get(path)
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in csp
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"


def test_a_refused_request_carries_the_headers_too(client: TestClient) -> None:
    refused = client.post("/api/runs", json=SPEC, headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403 and refused.headers["X-Frame-Options"] == "DENY"
