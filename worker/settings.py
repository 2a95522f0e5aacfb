"""The worker's own settings (prefix ``GRPODECK_``, like the web app's): what a training host
needs to know, and nothing about the web app's database. Shared defaults (broker, queue, data
directories) come from ``grpodeck.contract.tasks`` so both ends agree without importing each other.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from grpodeck.contract.heartbeat import HEARTBEAT_PATH
from grpodeck.contract.tasks import DEFAULT_BROKER_URL, DEFAULT_QUEUE, VAR


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GRPODECK_", env_file=".env", extra="ignore")

    broker_url: str = DEFAULT_BROKER_URL
    queue: str = DEFAULT_QUEUE
    runs_dir: Path = VAR / "runs"
    datasets_dir: Path = Field(
        VAR / "datasets", description="the only place local .json/.jsonl datasets are read from")
    models_dir: Path = Field(VAR / "models",
                             description="the only place local model directories are read from")
    cancel_grace_seconds: float = Field(
        30.0, description="after a stop request, how long the trainer may take before it is killed"
    )
    control_poll_seconds: float = 1.0
    slot_recheck_seconds: float = Field(
        10.0, gt=0, description="a run waiting for a free device slot asks the web app this often "
        "whether it is still to be trained (cancelled, or claimed by another worker: it stops "
        "waiting)")
    warm_start: bool = Field(
        True, description="a pool process imports the training stack once and forks each run's "
        "training child and each dry run's sampling child from itself (~10 s of CPU less per "
        "start); false: a fresh interpreter for each (worker.training.warm)")
    shutdown_grace_seconds: float = Field(
        45.0, gt=0, description="after SIGTERM (or Ctrl-C) the worker stops its running tasks "
        "(each training child gets cancel_grace_seconds) and has ended after this long at the "
        "latest; keep it above cancel_grace_seconds (worker.shutdown)")
    report_deadline_seconds: float = Field(
        300.0, description="at a run's end, how long the worker keeps retrying to deliver its last "
        "metrics and final status while the web app is unreachable")
    broker_visibility_seconds: float = Field(
        600.0, description="Redis: an unacknowledged task of a worker that died is redelivered "
        "after this long (a redelivered run that was already claimed is dropped by the claim)")

    public_url: str = "http://127.0.0.1:8000"
    report_url: str | None = Field(
        None, description="where this worker posts its heartbeat (the web app); defaults to "
        "public_url, as on the web side")
    worker_secret: str | None = Field(
        None, description="sent with the heartbeat; must match the web app's (unset: the web "
        "app accepts heartbeats from its own machine only)")
    heartbeat_seconds: float = Field(10.0, description="how often the worker posts a heartbeat")

    device_slots: str | None = Field(
        None, description="GPUs per concurrent run, e.g. \"0,1;2,3\": one Celery pool process "
        "per slot, each run's child sees only its slot's devices (worker.slots)")
    gpus_per_run: int | None = Field(
        None, ge=1, description="split the GPUs this worker finds into slots of this many "
        "(instead of device_slots)")
    device_locks_dir: Path = Field(
        VAR / "device-locks", description="lock files of the devices taken by this host's runs "
        "(must be local to the host: another container numbers its GPUs from 0 too)")

    @field_validator("device_slots", mode="before")
    @classmethod
    def _unset_when_blank(cls, value: object) -> object:
        """``GRPODECK_DEVICE_SLOTS=`` (compose's ``${GRPODECK_DEVICE_SLOTS:-}``) means unset."""
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def heartbeat_url(self) -> str:
        return (self.report_url or self.public_url).rstrip("/") + HEARTBEAT_PATH


@lru_cache
def get_settings() -> WorkerSettings:
    return WorkerSettings()
