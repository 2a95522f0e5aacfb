"""Wheel build hook: the files the app reads at run time travel inside the wheel.

Templates, static files, the Alembic migrations and configuration, and the npm files the app
serves (``npm ci`` must have run: node_modules is not in git) go under ``app/_data/``, where
``app.core.resources.data_path`` finds them in an installed package. An editable install adds
nothing: the checkout's own folders are used.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _constants(root: Path) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """PACKAGED and SERVED_NPM from app/core/resources.py, read without importing the app."""
    tree = ast.parse((root / "app" / "core" / "resources.py").read_text())
    found = {t.id: ast.literal_eval(node.value) for node in tree.body
             if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
             and t.id in ("PACKAGED", "SERVED_NPM")}
    return found["PACKAGED"], found["SERVED_NPM"]


def data_files(root: Path) -> dict[str, str]:
    """Source path -> path in the wheel, for every file of the packaged data."""
    packaged, served = _constants(root)
    out: dict[str, str] = {}
    for name in packaged:
        source = root / name
        sources = [source] if source.is_file() else sorted(
            p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        if not sources:
            raise RuntimeError(f"{source} is missing or empty")
        out.update({str(p): f"app/_data/{p.relative_to(root).as_posix()}" for p in sources})
    for package, names in served.items():
        for name in names:
            source = root / "node_modules" / package / name
            if not source.is_file():
                raise RuntimeError(f"{source} is missing: run `npm ci --omit=dev` first")
            out[str(source)] = f"app/_data/node_modules/{package}/{name}"
    return out


class DataHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        files = data_files(Path(self.root))
        if self.target_name == "sdist":  # the sources as they are, plus the served npm files
            files = {src: dst.removeprefix("app/_data/") for src, dst in files.items()
                     if dst.startswith("app/_data/node_modules/")}
        build_data["force_include"].update(files)
