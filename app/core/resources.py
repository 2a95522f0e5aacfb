"""Where the files the app reads at run time are: templates, static/, the Alembic migrations and
configuration, and the front-end packages it serves (htmx, plotly, Swagger UI).

In a checkout (editable install) they are the repository's own folders. A built wheel carries
them under ``app/_data/`` (``hatch_build.py``), found through ``importlib.resources``, so an
install anywhere (a venv, the image) migrates and serves without the source tree.
"""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
# The names a wheel carries; hatch_build.py reads this list too.
PACKAGED = ("templates", "static", "migrations", "alembic.ini")
# npm packages the app serves, and the files of each that it serves.
SERVED_NPM = {
    "htmx.org": ("dist/htmx.min.js", "LICENSE"),
    "plotly.js-cartesian-dist-min": ("plotly-cartesian.min.js", "LICENSE"),
    "swagger-ui-dist": ("swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE"),
}


def packaged_root() -> Path | None:
    """``app/_data`` of an installed wheel as a real folder, or None in a checkout."""
    data = files("app") / "_data"
    if not data.is_dir():
        return None
    with as_file(data) as path:  # a real folder for a normal install; zip imports are not supported
        return Path(path)


def data_path(name: str) -> Path:
    """The file or folder ``name`` (``"templates"``, ``"node_modules/htmx.org/dist"``) from
    the installed package, else from the checkout."""
    root = packaged_root()
    return (root if root is not None else CHECKOUT) / name
