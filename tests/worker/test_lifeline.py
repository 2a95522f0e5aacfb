"""Bug 5 at process level: a training child in its own session dies, with its grandchildren,
when its supervisor is kill -9-ed: through PR_SET_PDEATHSIG, and through the parent poll alone
when the signal is not available."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.config import ROOT
from tests.test_supervise import alive, wait_for

CHILD = """
import os, subprocess, sys, time
from functools import partial
from pathlib import Path
from grpodeck.client import spool
from worker.training import lifeline
if sys.argv[2] == "poll-only":
    lifeline._set_pdeathsig = lambda sig: False
path = Path(sys.argv[1] + ".spool")
spool.append(path, [{"step": 1, "metrics": {"loss": 1.0}}, {"step": 2, "metrics": {"loss": 2.0}}])
spool.mark_acked(path, 1)  # step 1 was delivered; step 2 is still waiting for the next flush
words = partial(spool.send_unacked, path, os.environ["REPORT_URL"] + "/api/runs/3/metrics", "t")
lifeline.tie_to_parent(int(os.environ["GRPODECK_SUPERVISOR_PID"]), poll_seconds=0.2,
                       last_words=words)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1] + ".tmp", "w").write(f"{os.getpid()} {grandchild.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""

# The supervisor: starts the child in its own session, as worker.tasks does, then waits.
SUPERVISOR = """
import os, subprocess, sys, time
env = {**os.environ, "GRPODECK_SUPERVISOR_PID": str(os.getpid())}
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]],
                 start_new_session=True, env=env)
time.sleep(600)
"""


@pytest.mark.parametrize("mode", ["pdeathsig", "poll-only"])
def test_child_and_grandchild_die_with_a_kill_9_supervisor(receiver, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                           mode: str) -> None:
    """...after sending the rows its server had not acknowledged yet (its last words)."""
    pids = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPORT_URL": receiver.url}
    supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISOR, CHILD, str(pids), mode],
                                  cwd=ROOT, env=env, start_new_session=True)
    child = grandchild = 0
    try:
        wait_for(pids.exists, "the child to start", 60)
        child, grandchild = map(int, pids.read_text().split())
        assert alive(child) and alive(grandchild)
        os.kill(supervisor.pid, signal.SIGKILL)
        supervisor.wait(timeout=10)
        wait_for(lambda: not alive(child) and not alive(grandchild),
                 "the orphaned child group to exit", 10)
        assert receiver.rows == [{"step": 2, "metrics": {"loss": 2.0}}]
        assert receiver.requests[0]["headers"]["Authorization"] == "Bearer t"
    finally:
        for pid in (supervisor.pid, child, grandchild):
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
