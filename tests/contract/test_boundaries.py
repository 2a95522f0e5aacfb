"""Where web and worker meet: only at ``grpodeck.contract``, which carries no server or ML stack.

Read from the source (the AST of every module) and from a fresh interpreter's ``sys.modules``,
so an import added anywhere, even inside a function, is caught.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a training node or an outside client must not need to install to use the contract.
HEAVY = ("fastapi", "starlette", "sqlalchemy", "celery", "kombu", "torch", "transformers", "trl",
         "app", "worker")
# Which top-level packages each side may not import.
FORBIDDEN = {"app": "worker", "worker": "app", "grpodeck": ("app", "worker")}


def imported_modules(source: str) -> list[tuple[int, str]]:
    """Every module an ``import`` or ``from ... import`` names, with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def crossings(package: str, root: Path = ROOT) -> list[str]:
    """``file:line module`` for each import in ``package`` of a package it must not import."""
    banned = FORBIDDEN[package]
    banned = (banned,) if isinstance(banned, str) else banned
    out = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path.read_text()):
            if module.split(".")[0] in banned:
                out.append(f"{path.relative_to(root)}:{line} {module}")
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_web_and_worker_meet_only_at_the_contract(package: str) -> None:
    assert crossings(package) == []


def test_the_client_distribution_imports_neither_app_nor_worker() -> None:
    """grpodeck.client lives in clients/python (its own distribution) under the same rule."""
    assert crossings("grpodeck", ROOT / "clients" / "python") == []


def test_a_crossing_import_is_found(tmp_path: Path) -> None:
    """The walk sees imports nested in functions and ``from`` forms (not just the top)."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.py").write_text(
        "def f():\n    from worker.tasks import replay\n    import worker.spool\n")
    assert crossings("app", tmp_path) == ["app/x.py:2 worker.tasks", "app/x.py:3 worker.spool"]


def loaded_after_import(module: str) -> set[str]:
    """Top-level packages a fresh interpreter holds after importing ``module``."""
    code = (f"import sys, {module}\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    return set(done.stdout.split())


CONTRACT = sorted(p.stem for p in (ROOT / "grpodeck" / "contract").glob("*.py")
                  if p.stem != "__init__")


@pytest.mark.parametrize("module", CONTRACT)
def test_the_contract_needs_no_server_or_ml_stack(module: str) -> None:
    loaded = loaded_after_import(f"grpodeck.contract.{module}")
    assert "grpodeck" in loaded  # the import itself happened in that interpreter
    assert sorted(loaded & set(HEAVY)) == []
