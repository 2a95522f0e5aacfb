"""Compression and caching (issue 12): pages and static files go out gzipped, and static files
linked by content hash are cacheable for a year while any other static URL must revalidate."""

from __future__ import annotations

import hashlib
import re

import pytest
from fastapi.testclient import TestClient

from app.core.assets import MOUNTS

pytestmark = pytest.mark.one_backend
GZIP = {"Accept-Encoding": "gzip"}


def _linked(page: str) -> dict[str, str]:
    """static URL path -> its v= hash, for every asset a page links."""
    return dict(re.findall(r'"(/static/(?:app|htmx|plotly)/[^"?]+)\?v=([0-9a-f]+)"', page))


def test_pages_link_assets_by_content_hash_and_those_are_immutable(client: TestClient) -> None:
    run_id = client.post("/api/runs", json={"model": "builtin:tiny-random"}).json()["id"]
    page = client.get(f"/runs/{run_id}", headers=GZIP)
    assert page.status_code == 200 and page.headers["content-encoding"] == "gzip"
    linked = _linked(page.text)
    assert {"/static/app/app.css", "/static/app/app.js", "/static/htmx/htmx.min.js",
            "/static/plotly/plotly-cartesian.min.js"} <= set(linked)
    for url, digest in linked.items():
        mount, name = url.removeprefix("/static/").split("/", 1)
        assert digest == hashlib.sha256((MOUNTS[mount] / name).read_bytes()).hexdigest()[:16]
    bundle = "/static/plotly/plotly-cartesian.min.js"
    plotly = client.get(f"{bundle}?v={linked[bundle]}", headers=GZIP)
    assert plotly.status_code == 200
    assert plotly.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert plotly.headers["content-encoding"] == "gzip"
    assert plotly.num_bytes_downloaded < 0.5 * len(plotly.content)  # sent vs decoded size
    assert plotly.headers["content-security-policy"]  # the security headers still apply


@pytest.mark.parametrize("query", ["", "?v=0123456789abcdef"])
def test_an_unhashed_or_stale_url_must_revalidate(client: TestClient, query: str) -> None:
    reply = client.get(f"/static/app/app.css{query}")
    assert reply.status_code == 200 and reply.headers["cache-control"] == "no-cache"


def test_json_is_compressed_for_clients_that_ask(client: TestClient) -> None:
    body = client.get("/openapi.json", headers=GZIP)
    assert body.headers["content-encoding"] == "gzip" and body.json()["info"]["title"]
    plain = client.get("/openapi.json", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.json() == body.json()
