"""Static assets under content-hashed URLs, cacheable for a year; responses compressed.

Templates write ``{{ asset('plotly', 'plotly.min.js') }}``, which becomes
``/static/plotly/plotly.min.js?v=<first 16 hex of its SHA-256>``. A request whose ``v`` is the
file's current hash is answered ``Cache-Control: public, max-age=31536000, immutable``: the
browser never asks again, and a new release changes the URL. Any other request for a static file
(no ``v``, or an old one) must revalidate (``no-cache``), so a stale link never pins old content.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qs

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.core.resources import data_path

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
MOUNTS: dict[str, Path] = {
    "app": data_path("static"),
    "htmx": data_path("node_modules/htmx.org/dist"),
    # plotly.js with the cartesian trace types only (about a third of the full bundle): npm
    # package plotly.js-cartesian-dist-min (package.json), installed like htmx
    "plotly": data_path("node_modules/plotly.js-cartesian-dist-min"),
}


@lru_cache(maxsize=256)
def _digest(path: Path, mtime_ns: int, size: int) -> str:
    """Keyed on mtime and size too: an edited file (development) gets a new hash at once."""
    sha = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:16]


def content_hash(path: Path) -> str | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return _digest(path, stat.st_mtime_ns, stat.st_size)


def asset(mount: str, name: str) -> str:
    """The content-hashed URL of a file under one of the ``MOUNTS``."""
    digest = content_hash(MOUNTS[mount] / name)
    url = f"/static/{mount}/{name}"
    return f"{url}?v={digest}" if digest else url


class HashedStaticFiles(StaticFiles):
    """StaticFiles that marks a response immutable when its URL carries the file's hash."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        wanted = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("v", [None])[0]
        full, _ = self.lookup_path(path)
        fresh = wanted is not None and full and wanted == content_hash(Path(full))
        response.headers["Cache-Control"] = IMMUTABLE if fresh else REVALIDATE
        return response
