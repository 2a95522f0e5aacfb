"""Where a training rank writes its progress lines (``grpodeck.contract.log_markers``).

Each line goes to stderr, for people reading the log, and to the run's markers file, whose path
the supervisor gave in ``MARKERS_ENV``: only that file is shipped as the signed ``markers``
stream the Devices panel believes, so a rank line that user code prints is just log text.
"""

from __future__ import annotations

import os
import sys

from grpodeck.contract.log_markers import MARKERS_ENV


def emit(line: str) -> None:
    """One whole line, one write each: ranks append to one file (``O_APPEND`` keeps a short
    write whole among concurrent writers)."""
    sys.stderr.write(line)
    sys.stderr.flush()
    path = os.environ.get(MARKERS_ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
