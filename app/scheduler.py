"""`grpodeck scheduler`: the one process for background work, apart from the web processes.

It delivers alerts (the outbox sender, every ``alert_poll_seconds``), checks live runs and
started dry runs for silence (``check_live_runs``, ``check_dry_runs``, every
``lost_check_seconds``) and, with ``settle_in=scheduler``, settles live runs' waiting metric
steps (``app.metrics.settler``). Running it inside every web process
would send everything once per uvicorn worker; it is a plain process rather than Celery beat
because Celery workers here are GPU machines busy with one long training task each (a beat task
would queue behind a run for hours) and hold no database credentials, while this loop needs
both the database and sub-second polling. Running two by mistake is safe: jobs are claimed
atomically (``app/alerts/outbox.py``) and the lost-run check only moves runs through the
lifecycle table.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from datetime import UTC, datetime

import httpx

from app.alerts.sender import Sender
from app.core.config import get_settings
from app.core.db import get_sessionmaker
from app.dryruns.lost import check_dry_runs
from app.ingest.watch import check_live_runs
from app.metrics.settler import start_here
from app.processes.service import beat
from grpodeck.contract.heartbeat import Heartbeat

log = logging.getLogger("grpodeck.scheduler")


class WebWatch:
    """Whether the web app (where workers report) answers, and since when.

    Silence while the web app was down is not the workers' fault: they keep their rows and
    deliver them when it returns. So the lost-run check is skipped while it is down, and
    silence is measured from when it last came back (``check_live_runs(since=...)``)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/healthz"
        self.up_since: datetime | None = datetime.now(UTC)

    def poll(self) -> datetime | None:
        """The time the web app has been answering since, or None while it is down."""
        try:
            ok = httpx.get(self.url, timeout=5).status_code == 200
        except httpx.HTTPError:
            ok = False
        if not ok:
            if self.up_since is not None:
                log.warning("web app at %s does not answer: lost-run check paused", self.url)
            self.up_since = None
        elif self.up_since is None:
            self.up_since = datetime.now(UTC)
        return self.up_since


class Beacon:
    """The scheduler's heartbeat, written straight to the database every ``heartbeat_seconds``:
    without it a dead scheduler (no alerts, no lost-run check) was silent (``app.processes``)."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.next_at = 0.0
        host = socket.gethostname()
        self.heartbeat = Heartbeat(name=f"scheduler@{host}", host=host, pid=os.getpid())

    def maybe_beat(self) -> None:
        if time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + self.every
        try:
            with get_sessionmaker()() as db:
                beat(db, "scheduler", self.heartbeat)
                db.commit()
        except Exception:  # a database hiccup must not end the loop; the next beat may pass
            log.exception("scheduler heartbeat failed")


def run(stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    settings = get_settings()
    sender = Sender()
    web = WebWatch(settings.web_health_url or settings.worker_report_url)
    next_check = time.monotonic() + settings.lost_check_seconds
    beacon = Beacon(settings.heartbeat_seconds)
    log.info("scheduler %s: sending alerts every %.1fs, lost-run check every %.0fs",
             sender.name, settings.alert_poll_seconds, settings.lost_check_seconds)
    settler = start_here("scheduler", get_sessionmaker(), settings.settle_seconds,
                         settings.settle_in)
    try:
        while not stop.is_set():
            beacon.maybe_beat()
            try:
                sender.cycle()
            except Exception:  # a database hiccup must not end the loop
                log.exception("alert sender cycle failed")
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + settings.lost_check_seconds
                try:
                    since = web.poll()
                    if since is not None:
                        check_live_runs(since=since)
                        check_dry_runs(since=since)
                except Exception:
                    log.exception("lost-run check failed")
            stop.wait(settings.alert_poll_seconds)
    finally:
        sender.close()
        if settler is not None:
            settler.stop()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run(stop)


if __name__ == "__main__":
    main()
