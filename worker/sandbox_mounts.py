"""The sandbox's mount set-up: the first program inside its namespaces, run by the sandbox's own
interpreter (``python -I -S -c`` this file's source), before the untrusted one.

Why a program of its own and not ``sh`` + ``mount(8)``: each ``mount`` was a fork and an exec,
one per mount point (18 on a CI machine), about two thirds of a sandboxed program's start. Here
every mount is one system call from one process. It needs only the standard library (the
sandbox's interpreter may be any python3), and falls back to ``mount(8)`` where ``ctypes`` is
missing (a minimal python build), so the containment never silently weakens.

Arguments: ``MODE PYTHON SOURCE TMPFS_SIZE SETPRIV HIDDEN...``; MODE is ``auto`` (system calls
when ``ctypes`` imports) or ``mount`` (always ``mount(8)``; the tests run both).

Steps, in order (the first may partly fail, the rest may not):
1. every mount read-only (a mount that refuses is named on stderr: the uid and rlimits hold);
2. private writable tmpfs on /tmp, and small ones on the other world-writable directories;
3. an empty read-only tmpfs over each hidden directory, /dev/null over each hidden file;
4. ``cd /tmp`` and exec ``setpriv`` (no capabilities left) -> ``python -I -S -c SOURCE``.
"""

from __future__ import annotations

import os
import re
import sys

PRIVATE_DIRS = ("/var/tmp", "/dev/shm", "/run/lock")

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_STRICTATIME = 1, 32, 4096, 1 << 24
# statvfs flags a bind remount must carry over: the kernel refuses to clear the ones locked in a
# user namespace. nosuid, nodev, noexec, noatime and nodiratime have the same bit in statvfs's
# f_flag and in mount(2); relatime is the kernel's default, strictatime must be asked for.
ST_CARRIED = os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME
ST_ATIME = os.ST_RELATIME | os.ST_NOATIME


class Mounter:
    """mount(2) through ``ctypes``, or ``mount(8)`` where ``ctypes`` is missing or not wanted."""

    def __init__(self, mode: str) -> None:
        self.libc = None
        if mode == "auto":
            try:
                import ctypes

                self.libc = ctypes.CDLL(None, use_errno=True)
                self.get_errno = ctypes.get_errno
            except (ImportError, OSError):
                pass  # no ctypes here: every mount through mount(8)

    def remount_read_only(self, target: bytes) -> None:
        if self.libc is None:
            return self._exec_mount([b"-o", b"remount,bind,ro", target])
        flag = os.statvfs(target).f_flag
        atime = 0 if flag & ST_ATIME else MS_STRICTATIME
        self._call(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | (flag & ST_CARRIED)
                   | atime, None)

    def tmpfs(self, target: bytes, options: str, read_only: bool = False) -> None:
        if self.libc is None:
            opts = ("ro," if read_only else "") + options
            return self._exec_mount([b"-t", b"tmpfs", b"-o", opts.encode(), b"tmpfs", target])
        self._call(b"tmpfs", target, b"tmpfs", MS_RDONLY if read_only else 0, options.encode())

    def bind(self, source: bytes, target: bytes) -> None:
        if self.libc is None:
            return self._exec_mount([b"--bind", source, target])
        self._call(source, target, None, MS_BIND, None)

    def _call(self, source: bytes | None, target: bytes, fstype: bytes | None, flags: int,
              data: bytes | None) -> None:
        if self.libc.mount(source, target, fstype, flags, data) != 0:
            errno = self.get_errno()
            raise OSError(errno, os.strerror(errno), target.decode(errors="replace"))

    @staticmethod
    def _exec_mount(args: list[bytes]) -> None:
        pid = os.fork()
        if pid == 0:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 2)
                os.execv(b"/bin/mount", [b"mount", *args])
            finally:
                os._exit(127)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise OSError(f"mount {b' '.join(args).decode(errors='replace')} failed")


def mount_points() -> list[bytes]:
    """Every mount point of this namespace once, parents first (``/proc/self/mountinfo``'s fifth
    field, with its octal escapes of spaces, tabs, newlines and backslashes decoded)."""
    with open("/proc/self/mountinfo", "rb") as f:
        fields = [line.split(b" ")[4] for line in f]
    unescape = re.compile(rb"\\([0-7]{3})")
    return sorted({unescape.sub(lambda m: bytes([int(m[1], 8)]), p) for p in fields})


def is_real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def main(argv: list[str]) -> None:
    mode, python, source, size, setpriv, *hidden = argv
    mounter = Mounter(mode)
    for point in mount_points():
        try:
            mounter.remount_read_only(point)
        except OSError:
            print(f"sandbox: {point.decode(errors='replace')} stays writable", file=sys.stderr)
    try:
        mounter.tmpfs(b"/tmp", f"size={size},mode=0700")
        for path in PRIVATE_DIRS:
            if is_real_dir(path):
                mounter.tmpfs(path.encode(), "size=1m")
        for path in hidden:
            if is_real_dir(path):
                mounter.tmpfs(path.encode(), "size=4k,mode=0555", read_only=True)
            elif os.path.isfile(path) and not os.path.islink(path):
                mounter.bind(b"/dev/null", path.encode())
    except OSError as exc:
        print(f"sandbox: cannot set up its mounts: {exc}", file=sys.stderr)
        sys.exit(125)
    os.chdir("/tmp")
    os.execv(setpriv, [setpriv, "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
                       "--", python, "-I", "-S", "-c", source])


if __name__ == "__main__":
    main(sys.argv[1:])
