"""What each install costs: the dashboard alone (``pip install grpodeck``) against the dashboard
with its worker extra (``pip install 'grpodeck[worker]'``), measured the same way, one after the
other (issue 56: the server's install had been 1.7 GB and 126 packages, all for the worker).

``python tools/install_footprint.py [--keep]`` from the repository root (``npm ci --omit=dev``
first: the server wheel carries the npm files it serves). Builds both wheels, then for each
variant a fresh ``python -m venv`` outside the checkout and one ``pip install --no-cache-dir``
(pip's own configuration applies: its index and find-links, the same for both), and prints
seconds, ``du -sb`` of the venv and ``pip list`` lines. Network and disk make the seconds vary
from hour to hour: compare two variants of one run only. docs/deploying.md has the figures.

Why not a bench: nothing here is the product's speed, and a cold install downloads hundreds of
MB; tests/packaging/test_web_only.py checks the sizes' ratio on every ``make test``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"dashboard alone": "grpodeck==0.1.0", "with the worker extra": "grpodeck[worker]==0.1.0"}


def run(*args: str, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def measure(name: str, requirement: str, wheels: Path, where: Path) -> dict[str, float]:
    venv = where / name.replace(" ", "-")
    run(str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", str(venv))
    pip = str(venv / "bin" / "pip")
    started = time.monotonic()
    run(pip, "install", "-q", "--no-cache-dir", "--find-links", str(wheels), requirement, cwd=where)
    seconds = time.monotonic() - started
    size = int(run("du", "-sb", str(venv)).split()[0])
    lines = len(run(pip, "list").splitlines())
    return {"seconds": seconds, "bytes": size, "pip_list_lines": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the venvs (their path printed)")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="grpodeck-footprint-"))
    try:
        wheels = where / "wheels"
        run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels),
            str(ROOT / "clients" / "python"), str(ROOT))
        print(f"{'install':<24}{'seconds':>9}{'MB on disk':>12}{'pip list lines':>16}")
        for name, requirement in VARIANTS.items():
            found = measure(name, requirement, wheels, where)
            print(f"{name:<24}{found['seconds']:>9.0f}{found['bytes'] / 1e6:>12,.0f}"
                  f"{found['pip_list_lines']:>16}", flush=True)
    finally:
        if args.keep:
            print(f"venvs kept in {where}")
        else:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
