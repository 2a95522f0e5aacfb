"""What the web server's access log keeps: people's requests and every error, not the routine
reports a training run sends every second.

Why: a live run posts a metric batch and polls its control endpoint about once a second (an
MLflow-protocol trainer, ``report_to="mlflow"``, one call per logged step; each worker a
heartbeat), so twenty runs wrote ~40 lines a second that buried the requests an operator reads
the log for; and writing each line was ~7 % of the server's time on the one-step-per-request
path (py-spy, issue 36). Such a request that succeeded is dropped from the log; a refused or
failed one (status 400 and up) is kept, as is everything else. ``GRPODECK_ACCESS_LOG_REPORTS``
keeps them all.
"""

from __future__ import annotations

import logging
import re

from grpodeck.contract.heartbeat import HEARTBEAT_PATH

ACCESS_LOGGER = "uvicorn.access"
# (method, path without the query) of the reports a run or a worker sends while it trains
ROUTINE = re.compile(
    r"(POST /api/runs/\d+/(metrics|logs)"
    r"|GET /api/runs/\d+/control"
    rf"|POST {re.escape(HEARTBEAT_PATH)}"
    r"|POST /api/2\.0/mlflow/runs/log-(batch|metric))")


class QuietRoutineReports(logging.Filter):
    """Drops uvicorn's access record of a routine report that succeeded. uvicorn logs
    ``'%s - "%s %s HTTP/%s" %d'`` with (client, method, path and query, version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True  # not uvicorn's access format: keep it
        _, method, path, _, status = args
        if not isinstance(status, int) or status >= 400:
            return True
        return ROUTINE.fullmatch(f"{method} {str(path).partition('?')[0]}") is None


def quiet_routine_reports(keep_all: bool) -> QuietRoutineReports | None:
    """Install the filter on uvicorn's access logger (once per process) unless ``keep_all``;
    returns it, for ``restore``."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if keep_all or any(isinstance(f, QuietRoutineReports) for f in logger.filters):
        return None
    quiet = QuietRoutineReports()
    logger.addFilter(quiet)
    return quiet


def restore(quiet: QuietRoutineReports | None) -> None:
    """Take the filter off again (the app's lifespan ends)."""
    if quiet is not None:
        logging.getLogger(ACCESS_LOGGER).removeFilter(quiet)
