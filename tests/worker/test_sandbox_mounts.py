"""The sandbox's mount set-up (worker/sandbox_mounts.py), seen from inside the sandbox: every mount
the program can reach is read-only but its private tmpfs, whichever way the mounts were made
(system calls, or ``mount(8)`` where the interpreter has no ``ctypes``), and mount points the
kernel escapes in /proc/self/mountinfo (a space in the name) are no exception.

The programs run under the real prlimit/unshare/setpriv chain (``sandbox._command``), as the
worker's own uid (the root-only uid switch is tested in test_sandbox.py).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from worker import sandbox

WRITABLE = {"/tmp", "/var/tmp", "/dev/shm", "/run/lock"}  # its own tmpfs's, nothing else
# Each mount point's topmost mount (a later line of mountinfo covers an earlier one at the same
# path) and whether that mount is read-only: what the program's writes would meet.
REPORT_MOUNTS = """
import json, re
top = {}
for line in open('/proc/self/mountinfo', 'rb'):
    fields = line.split(b' ')
    point = re.sub(rb'\\\\([0-7]{3})', lambda m: bytes([int(m[1], 8)]), fields[4]).decode()
    top[point] = 'ro' in fields[5].decode().split(',')
print(json.dumps(top))
"""


def command(source: str, mode: str) -> list[str]:
    """The worker's exact command line for ``source``, with the set-up in ``mode``."""
    same_uid = sandbox.Isolation(namespaces=True, own_uid=False, python=sandbox.sandbox_python())
    argv = sandbox._command(source, sandbox.Limits(), same_uid)
    argv[argv.index(sandbox.mounts_program()) + 1] = mode
    return argv


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=False, cwd=cwd, env=dict(sandbox.SCRUBBED_ENV),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", ["auto", "mount"])
def test_every_mount_but_its_own_tmpfs_is_read_only(mode: str, tmp_path: Path) -> None:
    done = run(command(REPORT_MOUNTS, mode), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "stays writable" not in done.stderr
    read_only = json.loads(done.stdout)
    assert "/" in read_only and "/proc" in read_only and len(read_only) > 3
    writable = {point for point, ro in read_only.items() if not ro}
    assert writable <= WRITABLE, f"writable inside the sandbox: {sorted(writable - WRITABLE)}"
    assert "/tmp" in writable


def test_a_mount_point_named_with_a_space_is_made_read_only(tmp_path: Path) -> None:
    """mountinfo writes the space as ``\\040``: the set-up must decode it to find the mount."""
    spaced = tmp_path / "data set"
    spaced.mkdir()
    # A namespace of its own holds the extra mount; the sandbox's namespaces nest inside it.
    outer = [shutil.which("unshare") or "unshare", "--user", "--map-root-user", "--mount", "--",
             "/bin/sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"', str(spaced)]
    done = run([*outer, *command("print('ran')", "auto")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran"
    assert "stays writable" not in done.stderr, done.stderr


def test_a_failed_private_mount_stops_before_the_program(tmp_path: Path) -> None:
    """After the read-only pass a mount may not fail: the program must not run half contained."""
    argv = command("print('ran')", "auto")
    size = argv.index(f"{sandbox.Limits().tmpfs_mb}m")
    argv[size] = "not-a-size"  # the kernel refuses the /tmp tmpfs's options
    done = run(argv, tmp_path)
    assert done.returncode == 125 and done.stdout == ""
    assert "cannot set up its mounts" in done.stderr


UNDO_MOUNTS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
tries = {
    'remount / writable': libc.mount(None, b'/', None, 32 | 4096, None),  # MS_REMOUNT|MS_BIND
    'unmount /tmp': libc.umount2(b'/tmp', 2),  # MNT_DETACH
    'new tmpfs on /usr': libc.mount(b'tmpfs', b'/usr', b'tmpfs', 0, None),
}
print({name: (rc, os.strerror(ctypes.get_errno())) for name, rc in tries.items()})
"""


def test_the_program_cannot_undo_its_mounts(tmp_path: Path) -> None:
    """The set-up ran as root of the namespace; the program after it holds no capability: every
    mount call it makes (remount writable, unmount its tmpfs, mount over a directory) fails."""
    done = run(command(UNDO_MOUNTS, "auto"), tmp_path)
    assert done.returncode == 0, done.stderr
    outcome = ast.literal_eval(done.stdout)
    assert outcome and all(rc == -1 for rc, _ in outcome.values()), outcome
    assert {why for _, why in outcome.values()} == {"Operation not permitted"}, outcome
