"""``grpodeck-client sync DIR``: deliver a run spooled by a process that ended before the Deck
took everything (it was down at ``init`` and never came back, or went down before ``finish``).

For each run folder (``grpodeck.client.rundir``) it registers the run unless the folder holds
its registration, posts the rows and captured steps past the acknowledged prefixes (the same
``Sender`` the training process used, so the same batching, validation and back-off), then
reports the end the process recorded. Every step is written down as acknowledged only once the
Deck took it, and the server merges by step, so a second sync (or one that overlaps what the
process delivered) stores nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grpodeck.client.run import DeckRefused, DeckUnavailable, register
from grpodeck.client.rundir import RunDir, find
from grpodeck.client.sender import Sender, Target


class SyncError(Exception):
    """A folder that cannot be delivered (no run spool, no address, the Deck refused)."""


@dataclass
class Synced:
    run_id: int
    url: str
    rows: int  # delivered now
    steps: int  # rollout steps delivered now
    rows_left: int
    steps_left: int
    status: str | None  # the end reported now (None: not reported now)
    over: int = 0  # lines the Deck would no longer take (it had ended the run)

    def line(self) -> str:
        if self.over:
            return (f"run {self.run_id}: the Deck had already ended the run; {self.over} spooled "
                    f"rows and rollout steps could not be stored ({self.url})")
        if self.rows_left or self.steps_left:
            return (f"run {self.run_id}: {self.rows_left} rows and {self.steps_left} rollout "
                    f"steps still waiting (the Deck did not take them); run sync again")
        if not (self.rows or self.steps or self.status):
            return f"run {self.run_id}: nothing left to deliver ({self.url})"
        ended = f", ended {self.status}" if self.status else ""
        return f"run {self.run_id}: delivered {self.rows} rows and {self.steps} rollout steps" \
            f"{ended}: {self.url}"


def _target(spool: RunDir, url: str | None, api_key: str | None, timeout: float) -> tuple[
        Target, str]:
    """The run's target (registering it first when the folder has no registration)."""
    try:
        spooled_url, body = spool.definition()
    except ValueError as exc:
        raise SyncError(str(exc)) from None
    base = (url or spooled_url).rstrip("/")
    if not base:
        raise SyncError(f"{spool.path}: no Deck address was known at init: pass --url")
    try:
        info = spool.registration()
    except ValueError as exc:
        raise SyncError(str(exc)) from None
    if info is None:
        try:
            info = register(base, body, api_key, timeout)
        except (DeckUnavailable, DeckRefused) as exc:
            raise SyncError(f"{spool.path}: {exc}") from None
        spool.save_registration(info)
    return Target(base, info.id, info.token), info.url


def sync_run(spool: RunDir, url: str | None, api_key: str | None, *, deadline: float = 600.0,
             timeout: float = 10.0) -> Synced:
    target, page = _target(spool, url, api_key, timeout)
    sender = Sender(target, spool.metrics_path, rollout_path=spool.rollouts_path,
                    flush_seconds=0.2, timeout=timeout)
    waiting = sender.pending() + sender.rollouts.pending()
    if waiting:
        sender.start()
        sender.close(deadline)
    state, status = sender.state, None
    rows_left, steps_left = sender.pending(), sender.rollouts.pending()
    ended = spool.finish()
    if ended and not ended.get("sent") and not (rows_left or steps_left or state.run_over):
        status = sender.finish(int(ended.get("returncode", 0)), ended.get("error"))
        if status:
            spool.save_finish(int(ended.get("returncode", 0)), ended.get("error"), sent=True)
    sender.shutdown()
    over = waiting - state.rows_delivered - state.rollouts_delivered if state.run_over else 0
    return Synced(int(target.run_id), page, state.rows_delivered, state.rollouts_delivered,
                  rows_left, steps_left, status, over)


def spools_in(folder: Path) -> list[RunDir]:
    """The run folders in ``folder`` (itself one, or holding some); SyncError when none."""
    spools = find(folder)
    if not spools:
        raise SyncError(f"{folder} holds no run spool (a folder with run.json, or folders of "
                        "them: what grpodeck.client.init writes under spool_dir)")
    return spools
