"""Wheels built as the image builds them, installed into fresh venvs outside the checkout.

The build context is what ``docker build`` would send (.dockerignore, read by docker-py), cut down
to what the Dockerfile copies; the wheels come from the Dockerfile's own ``pip wheel`` line run
there. ``npm ci`` is not rerun: the checkout's node_modules (made by the same ``npm ci --omit=dev``
in ``make setup``) stands in for it. Venvs are made with uv (from the dev extra): the server venv
resolves the same requirements as the worker image's ``pip install`` (the web venv the web
image's, without the worker extra), with torch from the local wheels pip is configured with
(PIP_FIND_LINKS) so no CUDA build is fetched.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from uv import find_uv_bin

from app.core.config import ROOT
from tests.locked_stack import ADMIN, cli, locked_stack
from tests.stack import Stack
from tests.test_compose import context

SERVER_STACK = ("fastapi", "sqlalchemy", "celery", "alembic", "uvicorn", "apprise")


def dockerfile_instructions(path: Path = ROOT / "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            pending = ""
    return out


def copy_sources() -> list[str]:
    """What the build stage copies from the context (``COPY --from`` is between stages)."""
    sources: list[str] = []
    for word, args in dockerfile_instructions():
        parts = shlex.split(args)
        if word == "COPY" and not any(p.startswith("--from") for p in parts):
            sources += [p for p in parts[:-1] if not p.startswith("--")]
    return sources


def wheel_line() -> str:
    runs = [args for word, args in dockerfile_instructions() if word == "RUN" and "pip wheel" in args]
    assert len(runs) == 1, runs
    return runs[0]


@dataclass(frozen=True)
class Wheels:
    folder: Path
    server: Path
    client: Path


def build_context(into: Path) -> Path:
    """The files ``docker build`` would get and the Dockerfile copies, in a fresh folder."""
    sent = context(ROOT)
    for source in copy_sources():
        for name in sorted(sent):
            if name == source or name.startswith(source.rstrip("/") + "/"):
                target = into / name
                if (ROOT / name).is_file():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / name, target)
    (into / "node_modules").symlink_to((ROOT / "node_modules").resolve())  # `RUN npm ci`
    return into


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    ctx = build_context(tmp_path_factory.mktemp("context"))
    out = tmp_path_factory.mktemp("wheels")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", wheel_line().replace("/wheels", str(out))], cwd=ctx,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return Wheels(out, next(out.glob("grpodeck-*.whl")), next(out.glob("grpodeck_client-*.whl")))


def uv(*args: str, timeout: float = 900) -> str:
    done = subprocess.run([find_uv_bin(), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env=clean_env())
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without the checkout on the import path or a venv of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def new_venv(path: Path, *requirements: str, find_links: list[Path]) -> Path:
    """A fresh venv at ``path`` (outside the checkout, no system site-packages)."""
    uv("venv", "-q", "--python", str(Path(sys.base_prefix) / "bin" / "python3"), str(path))
    links = [str(p) for p in find_links] + os.environ.get("PIP_FIND_LINKS", "").split()
    uv("pip", "install", "-q", "--python", str(path / "bin" / "python"),
       *[a for link in links for a in ("--find-links", link)], *requirements)
    return path


def installed(venv: Path) -> set[str]:
    listed = uv("pip", "list", "--format", "freeze", "--python", str(venv / "bin" / "python"))
    return {line.split("==")[0].lower() for line in listed.splitlines() if "==" in line}


@pytest.fixture(scope="session")
def server_venv(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The worker image's requirement, ``grpodeck[worker]==0.1.0`` from the wheels: the
    dashboard and the training stack (what ``make setup`` installs, less the dev tools)."""
    venv = tmp_path_factory.mktemp("server-venv")
    shutil.rmtree(venv)
    yield new_venv(venv, "grpodeck[worker]==0.1.0", find_links=[wheels.folder])
    shutil.rmtree(venv, ignore_errors=True)  # ~1 GB


@pytest.fixture(scope="session")
def web_venv(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The web image's requirement, ``grpodeck==0.1.0`` alone: the dashboard, no worker extra."""
    venv = tmp_path_factory.mktemp("web-venv")
    shutil.rmtree(venv)
    yield new_venv(venv, "grpodeck==0.1.0", find_links=[wheels.folder])
    shutil.rmtree(venv, ignore_errors=True)


@pytest.fixture(scope="session")
def client_venv(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("client-venv")
    shutil.rmtree(venv)
    return new_venv(venv, "grpodeck-client[trl]==0.1.0", find_links=[wheels.folder])


@dataclass(frozen=True)
class KeyedDeck:
    """A live Deck that requires login (tests/locked_stack.py) and an API key for it."""

    stack: Stack
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture(scope="session")
def keyed_deck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedDeck]:
    with locked_stack(tmp_path_factory.mktemp("keyed-deck")) as stack:
        made = cli("user", "api-key", ADMIN, "--name", "training-node", env=stack.env)
        assert made.returncode == 0, made.stderr
        yield KeyedDeck(stack, made.stdout.strip())
